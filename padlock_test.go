package padlock_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/conformance"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestOpenErrors(t *testing.T) {
	conformance.CheckOpenErrors(t, []conformance.OpenCase{
		{URL: "nosuch://x", Want: padlock.ErrUnknownScheme, Msg: "mem"},         // lists what is registered
		{URL: "nosuch://x", Want: padlock.ErrUnknownScheme, Msg: "padlock/all"}, // suggests the import
		{URL: "127.0.0.1:2379", Want: padlock.ErrInvalidURL, Msg: ""},
		{URL: "no-scheme", Want: padlock.ErrInvalidURL, Msg: "no scheme"},
		{URL: "mem://x?bogus=1", Want: padlock.ErrInvalidOption, Msg: `"bogus" for mem:// (known: ttl, wait, client)`},
		{URL: "mem://x?ttl=fast", Want: padlock.ErrInvalidOption, Msg: "ttl"},
		{URL: "mem://x?ttl=1ms", Want: padlock.ErrInvalidOption, Msg: "minimum"},
		{URL: "mem://x?wait=-1s", Want: padlock.ErrInvalidOption, Msg: "negative"},
		{URL: "mem://x?ttl=1s&ttl=2s", Want: padlock.ErrInvalidOption, Msg: "2 times"},
		{URL: "mem://x/path", Want: padlock.ErrInvalidURL, Msg: "path"},
	})
	if _, err := padlock.Open(context.Background(), "mem://x", padlock.WithTTL(0)); !errors.Is(err, padlock.ErrInvalidOption) {
		t.Errorf("Open with WithTTL(0) = %v, want ErrInvalidOption", err)
	}
}

func TestURLDefaults(t *testing.T) {
	ctx := context.Background()
	a, err := padlock.Open(ctx, "mem://defaults?ttl=300ms")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := padlock.Open(ctx, "mem://defaults?wait=20ms")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	lk, err := a.Lock(ctx, "n")
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(ctx)
	// b's URL default bounds its wait; the per-call option overrides it.
	if _, err := b.Lock(ctx, "n"); !errors.Is(err, padlock.ErrTimeout) {
		t.Errorf("Lock with ?wait=20ms = %v, want ErrTimeout", err)
	}
	if _, err := b.Lock(ctx, "n", padlock.WithWait(40*time.Millisecond)); !errors.Is(err, padlock.ErrTimeout) {
		t.Errorf("Lock with WithWait = %v, want ErrTimeout", err)
	}
}

func TestRegisterPanics(t *testing.T) {
	opener := func(context.Context, *url.URL, backends.Config) (backends.Driver, error) { return nil, nil }
	for name, f := range map[string]func(){
		"nil opener":   func() { padlock.Register("x-nil", nil) },
		"empty scheme": func() { padlock.Register("", opener) },
		"duplicate":    func() { padlock.Register("mem", opener) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register with %s did not panic", name)
				}
			}()
			f()
		}()
	}
}

// TestNameRules checks the name rules through the API: they are the
// portable layer's, the same on every backend.
func TestNameRules(t *testing.T) {
	ctx := context.Background()
	l, err := padlock.Open(ctx, "mem://names")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, bad := range []string{"", strings.Repeat("n", padlock.MaxNameLen+1), "\xc3\x28", "a\x00"} {
		if _, err := l.TryLock(ctx, bad); !errors.Is(err, padlock.ErrInvalidName) {
			t.Errorf("TryLock(%q) = %v, want ErrInvalidName", bad, err)
		}
		if _, err := l.Holders(ctx, bad); bad != "" && !errors.Is(err, padlock.ErrInvalidName) {
			t.Errorf("Holders(%q) = %v, want ErrInvalidName", bad, err)
		}
	}
	for _, good := range []string{"a", "orders/42", "ключ", strings.Repeat("é", padlock.MaxNameLen/2)} {
		lk, err := l.TryLock(ctx, good)
		if err != nil {
			t.Errorf("TryLock(%q) = %v", good, err)
			continue
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Errorf("Unlock(%q) = %v", good, err)
		}
	}
}

func TestRetryStrategies(t *testing.T) {
	if d := padlock.NoRetry().NextBackoff(0); d >= 0 {
		t.Errorf("NoRetry = %v, want negative", d)
	}
	if d := padlock.LinearBackoff(7 * time.Millisecond).NextBackoff(5); d != 7*time.Millisecond {
		t.Errorf("LinearBackoff = %v", d)
	}
	exp := padlock.ExponentialBackoff(10*time.Millisecond, 80*time.Millisecond)
	for attempt, hi := range []time.Duration{10, 20, 40, 80, 80, 80} {
		hi *= time.Millisecond
		if d := exp.NextBackoff(attempt); d < hi/2 || d > hi {
			t.Errorf("ExponentialBackoff attempt %d = %v, want in [%v, %v]", attempt, d, hi/2, hi)
		}
	}
	lim := padlock.LimitRetry(padlock.LinearBackoff(time.Millisecond), 2)
	if lim.NextBackoff(1) < 0 || lim.NextBackoff(2) >= 0 {
		t.Error("LimitRetry did not stop after 2 attempts")
	}
}

// TestOwnerRecorded checks that WithOwner's owner reaches the server with
// the claim, and that a context without one records none.
func TestOwnerRecorded(t *testing.T) {
	ctx := context.Background()
	l, err := padlock.Open(ctx, "mem://owners")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for name, owner := range map[string]string{"owned": "worker-1", "plain": ""} {
		lk, err := l.Lock(padlock.WithOwner(ctx, owner), name)
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Unlock(ctx)
		hs, err := l.Holders(ctx, name)
		if err != nil || len(hs) != 1 || hs[0].Owner != owner {
			t.Errorf("Holders(%q) = %+v, %v; want one holder with owner %q", name, hs, err, owner)
		}
	}
}

func TestOpenEnv(t *testing.T) {
	ctx := context.Background()
	t.Setenv(padlock.EnvURL, "")
	if _, err := padlock.OpenEnv(ctx); !errors.Is(err, padlock.ErrInvalidURL) || !strings.Contains(err.Error(), padlock.EnvURL) {
		t.Errorf("OpenEnv with %s unset = %v, want ErrInvalidURL naming the variable", padlock.EnvURL, err)
	}
	t.Setenv(padlock.EnvURL, "mem://env-test?ttl=300ms")
	l, err := padlock.OpenEnv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lk, err := l.TryLock(ctx, "n")
	if err != nil {
		t.Fatal(err)
	}
	lk.Unlock(ctx)
}

// The portable layer's own options: a nil logger or driver is refused, and a
// password never shows in an error about a URL.
func TestOpenOptionErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := padlock.Open(ctx, "mem://x", padlock.WithLogger(nil)); !errors.Is(err, padlock.ErrInvalidOption) {
		t.Errorf("WithLogger(nil) = %v, want ErrInvalidOption", err)
	}
	if _, err := padlock.NewLocker(nil); !errors.Is(err, padlock.ErrInvalidOption) {
		t.Errorf("NewLocker(nil) = %v, want ErrInvalidOption", err)
	}
	if _, err := padlock.Open(ctx, "mem://u:s3cret@x/%zz"); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Open of a bad URL with a password = %v: must fail without showing it", err)
	}
}
