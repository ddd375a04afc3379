package driverkit_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

func TestPassword(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "pw")
	if err := os.WriteFile(file, []byte("from-file\r\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DRIVERKIT_TEST_PW", "from-env")
	missing := filepath.Join(dir, "nope")
	for _, c := range []struct {
		raw, want string
		err       error
		msg       string
	}{
		{raw: "x://h:1"},
		{raw: "x://u@h:1"},
		{raw: "x://u:in-url@h:1", want: "in-url"},
		{raw: "x://u@h:1?password_file=" + file, want: "from-file"}, // trailing newlines dropped
		{raw: "x://u@h:1?password_env=DRIVERKIT_TEST_PW", want: "from-env"},
		{raw: "x://u@h:1?password_file=" + missing, err: backends.ErrInvalidOption, msg: "password_file=" + missing},
		{raw: "x://u@h:1?password_env=DRIVERKIT_TEST_UNSET", err: backends.ErrInvalidOption, msg: "password_env=DRIVERKIT_TEST_UNSET: the variable is not set"},
		{raw: "x://u:in-url@h:1?password_file=" + file, err: backends.ErrInvalidOption, msg: "more than one"},
		{raw: "x://u@h:1?password_file=" + file + "&password_env=DRIVERKIT_TEST_PW", err: backends.ErrInvalidOption, msg: "more than one"},
	} {
		got, err := driverkit.Password(mustURL(t, c.raw))
		// An error names the file or the variable, never a password.
		checkErr(t, "Password("+c.raw+")", err, c.err, []string{c.msg}, "in-url", "from-file", "from-env")
		if c.err == nil && got != c.want {
			t.Errorf("Password(%s) = %q, want %q", c.raw, got, c.want)
		}
	}
}

func TestParamLists(t *testing.T) {
	// A driver appends its own parameters to SecurityParams; one append
	// must never write into what another sees.
	a := append(driverkit.SecurityParams, "fair")
	b := append(driverkit.SecurityParams, "mode")
	if a[len(a)-1] != "fair" || b[len(b)-1] != "mode" {
		t.Errorf("appends to SecurityParams share an array: %q, %q", a, b)
	}
	want := len(driverkit.PasswordParams) + len(driverkit.TLSParams)
	if len(driverkit.SecurityParams) != want {
		t.Errorf("SecurityParams = %q, want PasswordParams and TLSParams", driverkit.SecurityParams)
	}
}
