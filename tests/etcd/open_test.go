package etcd_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
)

// Each misconfiguration fails fast with an error that names its cause, and
// leaves nothing on the server; no error or log line shows a password.
func TestTLSAndAuthErrors(t *testing.T) {
	s := startTLS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	addr := s.member.Addr
	good := s.url(addr, "padlock", padlockPassword, "/tls/err", nil)
	seen := conformance.CheckRefused(t, []conformance.OpenCase{
		// A CA that did not sign the server's certificate.
		{URL: strings.Replace(good, url.QueryEscape(s.certs.CA), url.QueryEscape(s.certs.OtherCA), 1),
			Want: padlock.ErrUnavailable, Msg: "certificate signed by unknown authority"},
		// An expired client certificate.
		{URL: strings.NewReplacer(url.QueryEscape(s.certs.ClientCert), url.QueryEscape(s.certs.ExpiredCert),
			url.QueryEscape(s.certs.ClientKey), url.QueryEscape(s.certs.ExpiredKey)).Replace(good),
			Want: padlock.ErrUnavailable, Msg: "certificate"}, // "expired certificate"; etcd 3.4: "bad certificate"
		// No client certificate.
		{URL: s.url(addr, "padlock", padlockPassword, "/tls/err", url.Values{"cert": nil, "key": nil}),
			Want: padlock.ErrUnavailable, Msg: "certificate"}, // "certificate required"; etcd 3.4: "bad certificate"
		// Plain text to a TLS port.
		{URL: "etcd://padlock:" + padlockPassword + "@" + addr + "/tls/err?dial_timeout=3s", Want: padlock.ErrUnavailable},
		// A wrong password, an unknown user.
		{URL: s.url(addr, "padlock", "not-"+padlockPassword, "/tls/err", nil), Want: padlock.ErrAccessDenied, Msg: "authentication failed"},
		{URL: s.url(addr, "nobody", padlockPassword, "/tls/err", nil), Want: padlock.ErrAccessDenied, Msg: "authentication failed"},
		// No user at all, and a user whose role has another prefix.
		{URL: s.url(addr, "", "", "/tls/err", nil), Want: padlock.ErrAccessDenied, Msg: "permission denied"},
		{URL: s.url(addr, "other", otherPassword, "/tls/err", nil), Want: padlock.ErrAccessDenied, Msg: "permission denied"},
		// A password variable that is not set; a missing CA file.
		{URL: s.url(addr, "padlock", "", "/tls/err", url.Values{"password_env": {"PADLOCK_TEST_UNSET_PW"}}),
			Want: padlock.ErrInvalidOption, Msg: "password_env=PADLOCK_TEST_UNSET_PW"},
		{URL: s.url(addr, "padlock", padlockPassword, "/tls/err", url.Values{"ca": {"/nonexistent/ca.pem"}}),
			Want: padlock.ErrInvalidOption, Msg: "ca=/nonexistent/ca.pem"},
	}, padlock.WithLogger(logger))

	// A user who may read the prefix but not write it opens (Open only
	// reads), and is refused at once on every acquisition.
	t.Setenv("PADLOCK_TEST_READER_PW", readerPassword)
	reader, err := padlock.Open(ctx, s.url(addr, "reader", "", "/tls/err", url.Values{"password_env": {"PADLOCK_TEST_READER_PW"}}), padlock.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	for _, try := range []struct {
		what string
		f    func() error
	}{
		{"Lock", func() error { _, err := reader.Lock(ctx, "denied"); return err }},
		{"TryLock", func() error { _, err := reader.TryLock(ctx, "denied"); return err }},
		{"Lock with a timeout", func() error {
			tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			_, err := reader.Lock(tctx, "denied")
			return err
		}},
	} {
		start := time.Now()
		err := try.f()
		if !errors.Is(err, padlock.ErrAccessDenied) || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("%s without write permission = %v, want ErrAccessDenied naming etcd's permission denied", try.what, err)
		} else {
			seen = append(seen, err.Error())
		}
		if d := time.Since(start); d > 15*time.Second {
			t.Errorf("%s without permission took %v to fail", try.what, d)
		}
	}
	if err := reader.Close(); err != nil {
		t.Errorf("closing the reader's Locker: %v", err)
	}
	if resp, err := s.root.Get(ctx, "", clientv3.WithFromKey(), clientv3.WithKeysOnly()); err != nil || resp.Count != 0 {
		t.Errorf("refused calls left keys: %v (%v)", resp.Kvs, err)
	}
	if resp, err := s.root.Leases(ctx); err != nil || len(resp.Leases) != 0 {
		t.Errorf("refused calls left leases: %v (%v)", resp.Leases, err)
	}

	conformance.NoSecrets(t, strings.Join(seen, "\n")+"\n"+logs.String(), padlockPassword, rootPassword, readerPassword, otherPassword)
}

func TestOpenErrors(t *testing.T) {
	conformance.CheckOpenErrors(t, []conformance.OpenCase{
		{URL: "etcd://127.0.0.1:1/p?bogus=1", Want: padlock.ErrInvalidOption, Msg: `"bogus" for etcd:// (known: ttl, wait, dial_timeout, request_timeout, password_file, password_env, ca, cert, key, server_name)`},
		{URL: "etcds://127.0.0.1:1/p?bogus=1", Want: padlock.ErrInvalidOption, Msg: `"bogus" for etcds://`},
		{URL: "etcds://127.0.0.1:1/p?ca=/nonexistent/ca.pem", Want: padlock.ErrInvalidOption, Msg: "ca=/nonexistent/ca.pem"},
		{URL: "etcds://127.0.0.1:1/p?key=/tmp/k.pem", Want: padlock.ErrInvalidOption, Msg: "cert= and key= go together"},
		{URL: "etcd://u:s3cret@127.0.0.1:1/p?password_env=PW", Want: padlock.ErrInvalidOption, Msg: "at once"},
		{URL: "etcd://:s3cret@127.0.0.1:1/p", Want: padlock.ErrInvalidURL, Msg: "a password without a user"},
		// Over TLS too, a refused port is the dial error, at once.
		{URL: "etcds://127.0.0.1:1/p", Want: padlock.ErrUnavailable, Msg: "connection refused"},
		{URL: "etcd://127.0.0.1:1/p?dial_timeout=soon", Want: padlock.ErrInvalidOption, Msg: "dial_timeout"},
		{URL: "etcd://127.0.0.1:1/p?request_timeout=0s", Want: padlock.ErrInvalidOption, Msg: "request_timeout"},
		{URL: "etcd:///p", Want: padlock.ErrInvalidURL, Msg: "host:port"},
		{URL: "etcd://127.0.0.1:1,127.0.0.1:1/p", Want: padlock.ErrInvalidURL, Msg: "appears twice"},
		{URL: "etcd://127.0.0.1:1/p?dial_timeout=200ms", Want: padlock.ErrUnavailable, Msg: "127.0.0.1:1"},
		// The dial error is the cause, reachable with errors.As.
		{URL: "etcd://127.0.0.1:1/p", Want: padlock.ErrUnavailable, Msg: "connection refused"},
		{URL: "etcd://no-such-host.invalid:2379/p", Want: padlock.ErrUnavailable, Msg: "no such host"},
	})
}

// An unreachable endpoint fails Open with the dial error as its cause, at
// once rather than after the dial timeout, whatever the caller's context.
func TestOpenRefusedCause(t *testing.T) {
	_, err := padlock.Open(context.Background(), "etcd://127.0.0.1:1/p?dial_timeout=1m")
	var op *net.OpError
	if !errors.Is(err, padlock.ErrUnavailable) || !errors.As(err, &op) {
		t.Fatalf("Open against a refused port = %v, want ErrUnavailable wrapping a *net.OpError", err)
	}
	if strings.Contains(err.Error(), "deadline") {
		t.Errorf("Open against a refused port waited for its deadline: %v", err)
	}
	// With a one-minute dial timeout, only failing fast can pass this bound.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := padlock.Open(ctx, "etcd://127.0.0.1:1/p?dial_timeout=1m"); ctx.Err() != nil {
		t.Errorf("Open against a refused port waited for the caller's deadline: %v", err)
	}
}

// TestWithDialer opens the etcd client's connections through the
// application's dial function.
func TestWithDialer(t *testing.T) {
	var dials atomic.Int64
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	ctx := context.Background()
	l, err := padlock.Open(ctx, server.URL()+"/dialer", padlock.WithDialer(dial))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	conformance.Cycle(ctx, t, l, "dialed")
	if dials.Load() == 0 {
		t.Error("the dial function was never called")
	}
}
