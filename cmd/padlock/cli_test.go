package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// argsEnv, when set, makes the test binary the padlock command: TestMain
// runs main with its lines as the arguments, so a test sees the real exit
// status and everything printed.
const argsEnv = "PADLOCK_TEST_MAIN_ARGS"

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(argsEnv); ok {
		os.Args = append([]string{"padlock"}, strings.Split(args, "\n")...)
		main()
		os.Exit(0) // as a main that returns
	}
	os.Exit(m.Run())
}

// runCLI runs the padlock command with args and env (on top of this process's)
// and returns its output, stdout then stderr, and exit status.
func runCLI(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(append(os.Environ(), argsEnv+"="+strings.Join(args, "\n")), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &ee) && ee.Exited():
		return out.String(), ee.ExitCode()
	}
	t.Fatalf("padlock %q: %v\n%s", args, err, out.String())
	return "", -1
}

// The passwords of secretURL, which every command's --url defaults to in
// these tests.
const secretURL = "postgres://app:apppass@127.0.0.1:1/db?sslpassword=keypass"

var secrets = []string{"apppass", "keypass"}

// Every command's -h exits 0, and neither it nor a flag error (which
// prints the usage too) shows the password of $PADLOCK_URL, the default
// of --url.
func TestHelpHidesPassword(t *testing.T) {
	env := []string{"PADLOCK_URL=" + secretURL}
	check := func(args []string, wantStatus int) {
		out, status := runCLI(t, env, args...)
		if status != wantStatus {
			t.Errorf("padlock %q: exit status %d, want %d\n%s", args, status, wantStatus, out)
		}
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Errorf("padlock %q shows the password %q:\n%s", args, s, out)
			}
		}
		if !strings.Contains(strings.ToLower(out), "usage") {
			t.Errorf("padlock %q prints no usage:\n%s", args, out)
		}
	}
	check([]string{"-h"}, 0)
	for _, c := range commands {
		check([]string{c.name, "-h"}, 0)
		check([]string{c.name, "--no-such-flag"}, 2)
	}
	// The redacted URL is still shown, so the user sees which one it is.
	if out, _ := runCLI(t, env, "holders", "-h"); !strings.Contains(out, "postgres://app:xxxxx@127.0.0.1:1/db") {
		t.Errorf("holders -h does not show the redacted default URL:\n%s", out)
	}
}

// A flag value out of range, an invalid URL or lock name, and arguments a
// command does not take are usage errors, exit status 2, found before
// anything is opened or started, with a message that names what is wrong.
func TestBadFlagValuesAreUsageErrors(t *testing.T) {
	env := []string{"PADLOCK_URL=mem://cli-test"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--ttl", "1ms", "n", "--", "true"}, "--ttl 1ms"},
		{[]string{"run", "--ttl", "-1s", "n", "--", "true"}, "--ttl -1s"},
		{[]string{"run", "--wait", "-1s", "n", "--", "true"}, "--wait -1s"},
		{[]string{"run", "--grace", "-1s", "n", "--", "true"}, "--grace -1s"},
		{[]string{"run", "--ttl", "soon", "n", "--", "true"}, "invalid value"},
		{[]string{"run", "", "--", "true"}, "invalid lock name"},
		{[]string{"run", "--url", "mem://x?ttl=1ms", "n", "--", "true"}, "ttl"},
		{[]string{"holders", "--watch", "-1s"}, "--watch -1s"},
		{[]string{"holders", "--url", "mem://x?bogus=1"}, `"bogus"`},
		{[]string{"holders", "--url", "gopher://x"}, "unknown url scheme"},
		{[]string{"unlock", "--force", "--yes", ""}, "invalid lock name"},
		{[]string{"migrate", "--url", "postgres://u@127.0.0.1:1/db?table=a;b"}, `"table" contains ";"`},
		{[]string{"demo", "--clients", "0"}, "--clients"},
		{[]string{"demo", "--duration", "-1s"}, "--duration"},
		{[]string{"demo", "extra"}, "no arguments"},
		{[]string{"serve", "--interval", "0"}, "--interval"},
		{[]string{"bench", "--url", "mem://x", "--duration", "0"}, "--duration"},
		{[]string{"bench", "--url", "mem://x", "--rounds", "0"}, "--rounds"},
		{[]string{"bench", "--url", "mem://x", "--workloads", "U9"}, `"U9"`},
		{[]string{"bench", "--url", "redis://127.0.0.1:1/?fair=true;x=1"}, `"fair" contains ";"`},
		{[]string{"faults", "--faults", "0"}, "--faults"},
		{[]string{"faults", "--backends", "no-such-backend"}, "no-such-backend"},
		{[]string{"faults", "--scenarios", "999"}, "999"},
		{[]string{"faults", "extra"}, "no arguments"},
		{[]string{"etcd", "--initial-cluster-state", "maybe"}, "maybe"},
		{[]string{"etcd", "extra"}, "unexpected arguments"},
		{[]string{"version", "extra"}, "no arguments"},
		{[]string{"no-such-command"}, "unknown command"},
		{nil, "usage"},
	} {
		out, status := runCLI(t, env, c.args...)
		if status != 2 || !strings.Contains(out, c.want) {
			t.Errorf("padlock %q: exit status %d, want 2 with a message saying %q\n%s", c.args, status, c.want, out)
		}
	}
}
