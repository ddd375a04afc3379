package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
)

// holders and unlock --force against an embedded etcd: the table and the
// JSON show a hold with its owner and token; unlock asks first, refuses
// without --force, takes the lock away with --yes (the holder's Done
// closes), and exits with status 3 when nobody holds the name.
func TestHoldersAndForceUnlock(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	addr, stop, err := embeddedEtcd(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	url := "etcd://" + addr + "/ops"
	l, err := padlock.Open(ctx, url, padlock.WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
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
