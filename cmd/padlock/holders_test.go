package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
)

// holders and unlock --force against an embedded etcd: the table and the
// JSON show a hold with its owner and token; unlock asks first, refuses
// without --force, takes the lock away with --yes (the holder's Done
// closes), and exits with status 3 when nobody holds the name.
func TestHoldersAndForceUnlock(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url := opsEtcd(t, ctx)
	l := openTTL(t, ctx, url, 2*time.Second)
	lk, err := l.Lock(padlock.WithOwner(ctx, "job-7"), "ops/nightly")
	if err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	if err := runHolders(ctx, []string{"--url", url, "ops/"}, &out); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "ops/nightly") || !strings.Contains(s, "job-7") ||
		!strings.Contains(s, " "+itoa(lk.Token())+" ") {
		t.Errorf("holders table lacks the hold (token %d):\n%s", lk.Token(), s)
	}
	out.Reset()
	if err := runHolders(ctx, []string{"--url", url, "--json"}, &out); err != nil {
		t.Fatal(err)
	}
	var hs []holderJSON
	if err := json.Unmarshal(out.Bytes(), &hs); err != nil || len(hs) != 1 || hs[0].Token != lk.Token() || hs[0].Owner != "job-7" {
		t.Errorf("holders --json = %s (%v), want the one hold", out.String(), err)
	}

	var ue usageError
	if err := runUnlock(ctx, []string{"--url", url, "ops/nightly"}, strings.NewReader(""), &out); !errors.As(err, &ue) {
		t.Errorf("unlock without --force = %v, want a usage error", err)
	}
	if err := runUnlock(ctx, []string{"--url", url, "--force", "ops/nightly"}, strings.NewReader("n\n"), &out); err == nil {
		t.Error("unlock answered no: no error")
	}
	if lockDone(lk) {
		t.Fatal("unlock answered no, yet the hold ended")
	}
	if err := runUnlock(ctx, []string{"--url", url, "--force", "ops/nightly"}, strings.NewReader("y\n"), &out); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lk.Done():
	case <-ctx.Done():
		t.Fatal("the force-released hold's Done never closed")
	}
	var ee exitError
	if err := runUnlock(ctx, []string{"--url", url, "--force", "--yes", "ops/nightly"}, nil, &out); !errors.As(err, &ee) || ee.code != 3 {
		t.Errorf("unlock of a free name = %v, want exit status 3", err)
	}
}

func lockDone(lk *padlock.Lock) bool {
	select {
	case <-lk.Done():
		return true
	default:
		return false
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// holders names each hold's kind: a writer, the readers of a read-write
// lock, the permits of a semaphore, an election's leader with its value
// and its candidates (on mem://, where every recipe runs).
func TestHoldersKinds(t *testing.T) {
	ctx := context.Background()
	url := "mem://holders-kinds"
	l, err := padlock.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var held []*padlock.Lock
	take := func(lk *padlock.Lock, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, lk)
	}
	take(l.Lock(ctx, "k/mutex"))
	take(l.RLock(ctx, "k/read"))
	take(l.RLock(ctx, "k/read"))
	take(l.Lock(ctx, "k/sem", padlock.WithLimit(3)))
	take(l.Lock(ctx, "k/sem", padlock.WithLimit(3)))
	defer padlock.UnlockAll(ctx, held)
	ld, err := l.Election("k/elect").Campaign(ctx, "10.0.0.7:8080 main")
	if err != nil {
		t.Fatal(err)
	}
	defer ld.Resign(ctx)
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	candidate := make(chan error, 1)
	go func() {
		_, err := l.Election("k/elect").Campaign(cctx, "second")
		candidate <- err
	}()
	defer func() { stop(); <-candidate }()
	conformance.WaitFor(ctx, t, "a candidate waiting", time.Minute, func() bool {
		hs, err := l.Holders(ctx, "k/elect")
		return err == nil && len(hs) == 1 && hs[0].Waiters == 1
	})

	var out bytes.Buffer
	if err := runHolders(ctx, []string{"--url", url, "k/"}, &out); err != nil {
		t.Fatal(err)
	}
	rows := map[string]int{}
	for _, line := range strings.Split(out.String(), "\n")[1:] {
		if f := strings.Fields(line); len(f) > 2 {
			kind := f[1]
			if kind == "permit" {
				kind += " " + f[2]
			}
			rows[f[0]+" "+kind]++
			if kind == "leader" {
				rows[f[0]+" waiters "+f[len(f)-3]+" value "+strings.Join(f[len(f)-2:], " ")]++
			}
		}
	}
	want := map[string]int{"k/mutex writer": 1, "k/read reader": 2, "k/sem permit 1/3": 1, "k/sem permit 2/3": 1,
		"k/elect leader": 1, `k/elect waiters 1 value "10.0.0.7:8080 main"`: 1}
	for k, n := range want {
		if rows[k] != n {
			t.Errorf("holders table has %d rows %q, want %d:\n%s", rows[k], k, n, out.String())
		}
	}
	out.Reset()
	if err := runHolders(ctx, []string{"--url", url, "--json", "k/sem"}, &out); err != nil {
		t.Fatal(err)
	}
	var hs []holderJSON
	if err := json.Unmarshal(out.Bytes(), &hs); err != nil || len(hs) != 2 || hs[0].Kind != "permit 1/3" || hs[0].Limit != 3 {
		t.Errorf("holders --json k/sem = %s (%v), want two permits of 3", out.String(), err)
	}
	out.Reset()
	if err := runHolders(ctx, []string{"--url", url, "--json", "k/elect"}, &out); err != nil {
		t.Fatal(err)
	}
	hs = nil
	if err := json.Unmarshal(out.Bytes(), &hs); err != nil || len(hs) != 1 || hs[0].Kind != "leader" || hs[0].Value != "10.0.0.7:8080 main" ||
		hs[0].Token != ld.Token() {
		t.Errorf("holders --json k/elect = %s (%v), want the leader, its value and token %d", out.String(), err, ld.Token())
	}
}

// onRead is a terminal whose user answers after something happened: the
// first Read runs before, then answers answer.
type onRead struct {
	before func()
	answer string
	done   bool
}

func (r *onRead) Read(p []byte) (int, error) {
	if r.done {
		return 0, io.EOF
	}
	r.done = true
	r.before()
	return copy(p, r.answer), nil
}

// unlock --force asks about the holds it found, and releases those only:
// if the name changed hands while the operator answered (the stuck holder
// let go, or its lease ran out, and another took the name), it releases
// nothing and says so. It took the name from the new holder before.
func TestForceUnlockChangedHandsWhileAsked(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url := opsEtcd(t, ctx)
	a, b := openTTL(t, ctx, url, 2*time.Second), openTTL(t, ctx, url, 2*time.Second)
	stuck, err := a.Lock(ctx, "ops/stuck")
	if err != nil {
		t.Fatal(err)
	}
	var next *padlock.Lock
	answer := &onRead{answer: "y\n", before: func() {
		if err := stuck.Unlock(ctx); err != nil {
			t.Error(err)
		}
		var err error
		if next, err = b.Lock(ctx, "ops/stuck"); err != nil {
			t.Error(err)
		}
	}}
	var out bytes.Buffer
	err = runUnlock(ctx, []string{"--url", url, "--force", "ops/stuck"}, answer, &out)
	if err == nil || !strings.Contains(err.Error(), "changed hands") {
		t.Fatalf("unlock --force after the name changed hands while asked: %v, want it refused", err)
	}
	if next == nil {
		t.Fatal("the next holder did not take the name")
	}
	if lockDone(next) {
		t.Fatal("the next holder, never asked about, lost the name")
	}
	if !strings.Contains(out.String(), "token "+itoa(stuck.Token())) {
		t.Errorf("the question did not name the stuck hold (token %d): %q", stuck.Token(), out.String())
	}
	if err := next.Unlock(ctx); err != nil {
		t.Error(err)
	}
}

// opsEtcd starts an embedded etcd for a test, stopped at its end, and
// returns the URL of its /ops prefix.
func opsEtcd(t *testing.T, ctx context.Context) string {
	t.Helper()
	addr, stop, err := embeddedEtcd(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return "etcd://" + addr + "/ops"
}
