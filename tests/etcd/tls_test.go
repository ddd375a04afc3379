package etcd_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
	"github.com/padlock-go/padlock/padlocktest"
)

const (
	rootPassword    = "root-Pw-31c8"
	padlockPassword = "s3cret-Pw-9f2c"
	readerPassword  = "reader-Pw-0b1d"
	otherPassword   = "other-Pw-6e02"
)

// tlsServer is an etcd member that serves clients over TLS only, requires
// client certificates from the test CA, and has authentication on, with
// these users:
//   - root, whom the test's own client is by its certificate's common name
//     (it needs no token: the etcd client before 3.5 fails to renew
//     one against an etcd 3.4, which padlock's own client works around);
//   - padlock: read and write on /tls/ and nothing else (the least
//     privilege docs/security.md lists);
//   - reader: read only on /tls/;
//   - other: read and write on /other/ only.
//
// Auth tokens live three seconds unused, so a Locker idle for longer must
// renew its token.
type tlsServer struct {
	certs  *padlocktest.Certs
	member *padlocktest.Node
	pwFile string
	root   *clientv3.Client
}

func startTLS(t *testing.T) *tlsServer {
	t.Helper()
	certs, pwFile := padlocktest.NewCerts(t), padlocktest.SecretFile(t, padlockPassword)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := padlocktest.New(ctx, padlocktest.Etcd, padlocktest.TLS(certs), padlocktest.EtcdAuthTokenTTL(3))
	if err != nil {
		t.Fatalf("TLS etcd: %v", err)
	}
	t.Cleanup(c.Close)
	s := &tlsServer{certs: certs, member: c.Nodes()[0], pwFile: pwFile}
	s.root = s.rootClient(t)
	t.Cleanup(func() { s.root.Close() })
	a := s.root.Auth
	for _, step := range []func() error{
		func() error { _, err := a.UserAdd(ctx, "root", rootPassword); return err },
		func() error { _, err := a.UserGrantRole(ctx, "root", "root"); return err },
		func() error {
			return s.user(ctx, "padlock", padlockPassword, "/tls/", clientv3.PermissionType(clientv3.PermReadWrite))
		},
		func() error {
			return s.user(ctx, "reader", readerPassword, "/tls/", clientv3.PermissionType(clientv3.PermRead))
		},
		func() error {
			return s.user(ctx, "other", otherPassword, "/other/", clientv3.PermissionType(clientv3.PermReadWrite))
		},
		func() error { _, err := a.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("setting up etcd auth: %v", err)
		}
	}
	return s
}

// user adds a user with one role that may act on the keys under prefix.
func (s *tlsServer) user(ctx context.Context, name, password, prefix string, perm clientv3.PermissionType) error {
	a := s.root.Auth
	if _, err := a.RoleAdd(ctx, name); err != nil {
		return err
	}
	if _, err := a.RoleGrantPermission(ctx, name, prefix, clientv3.GetPrefixRangeEnd(prefix), perm); err != nil {
		return err
	}
	if _, err := a.UserAdd(ctx, name, password); err != nil {
		return err
	}
	_, err := a.UserGrantRole(ctx, name, name)
	return err
}

// rootClient is a plain etcd client over TLS, root by its certificate.
func (s *tlsServer) rootClient(t *testing.T) *clientv3.Client {
	t.Helper()
	cfg, err := s.certs.ClientTLS()
	if err == nil {
		var pair tls.Certificate
		pair, err = tls.LoadX509KeyPair(s.certs.RootCert, s.certs.RootKey)
		cfg.Certificates, cfg.ServerName = []tls.Certificate{pair}, ""
	}
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{s.member.Addr}, TLS: cfg,
		DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("etcd root client: %v", err)
	}
	return cli
}

// url is an etcds:// URL to addr for user, with the test CA and client
// certificate, and the password in the URL (or, if empty, in extra).
func (s *tlsServer) url(addr, user, password, prefix string, extra url.Values) string {
	q := url.Values{"ca": {s.certs.CA}, "cert": {s.certs.ClientCert}, "key": {s.certs.ClientKey}}
	for k, v := range extra {
		q[k] = v
	}
	u := url.URL{Scheme: "etcds", Host: addr, Path: prefix, RawQuery: q.Encode()}
	switch {
	case user == "":
	case password == "":
		u.User = url.User(user)
	default:
		u.User = url.UserPassword(user, password)
	}
	return u.String()
}

// A Locker keeps working when the server drops its auth token: a password
// change drops every token of the user (here the password stays the same),
// and the client logs in again. On etcd 3.4 this needs padlock's login
// workaround (etcd/login.go): without it the client retries its login with
// the dropped token until the request's deadline, again and again.
func TestTokenRenewed(t *testing.T) {
	s := startTLS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l, err := padlock.Open(ctx, s.url(s.member.Addr, "padlock", "", "/tls/renew", url.Values{"password_file": {s.pwFile}}))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var last uint64
	for round := range 3 {
		lk, err := l.Lock(ctx, "a")
		if err != nil {
			t.Fatalf("round %d: Lock after the server dropped the token: %v", round, err)
		}
		if lk.Token() <= last {
			t.Errorf("round %d: token %d, want above %d", round, lk.Token(), last)
		}
		last = lk.Token()
		if err := lk.Unlock(ctx); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if _, err := s.root.UserChangePassword(ctx, "padlock", padlockPassword); err != nil {
			t.Fatal(err)
		}
	}
}

// A tls.Config the application built (padlock.WithTLSConfig) stands in for
// the URL's certificate files.
func TestWithTLSConfig(t *testing.T) {
	s := startTLS(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := s.certs.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	cfg.ServerName = "" // each endpoint's host is verified
	u := "etcds://padlock@" + s.member.Addr + "/tls/own?" + url.Values{"password_file": {s.pwFile}}.Encode()
	l, err := padlock.Open(ctx, u, padlock.WithTLSConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	conformance.Cycle(ctx, t, l, "a")
	// Without it, the server refuses the connection for want of a client
	// certificate.
	if _, err := padlock.Open(ctx, u+"&ca="+url.QueryEscape(s.certs.CA)); !errors.Is(err, padlock.ErrUnavailable) || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("Open without a client certificate = %v, want ErrUnavailable naming it", err)
	}
}

// A waiter's watches share one gRPC stream, whose auth token is the one it
// opened with. When the server drops that token while the stream stays
// open (here a password change, while the waiter waits on one name), a
// new wait on another name is refused its watch for the token: the client
// moves its watches to a new stream with a renewed token, and the wait
// ends with the lock, not with an error or a hang.
func TestWatchTokenRenewed(t *testing.T) {
	s := startTLS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	open := func() *padlock.Locker {
		l, err := padlock.Open(ctx, s.url(s.member.Addr, "padlock", "", "/tls/watch", url.Values{"password_file": {s.pwFile}}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	holder, waiter := open(), open()
	held := map[string]*padlock.Lock{}
	for _, name := range []string{"x", "y"} {
		lk, err := holder.Lock(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		held[name] = lk
	}
	queued := func(name string) {
		t.Helper()
		padlocktest.WaitFor(t, "the waiter queued for "+name, time.Minute, func() bool {
			resp, err := s.root.Get(ctx, "/tls/watch/"+name+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
			if err != nil {
				t.Fatal(err)
			}
			return resp.Count == 2
		})
	}
	got := map[string]chan error{}
	wait := func(name string) {
		ch := make(chan error, 1)
		got[name] = ch
		go func() {
			lk, err := waiter.Lock(ctx, name)
			if err == nil {
				err = lk.Unlock(ctx)
			}
			ch <- err
		}()
		queued(name)
	}
	wait("x") // opens the watch stream
	if _, err := s.root.UserChangePassword(ctx, "padlock", padlockPassword); err != nil {
		t.Fatal(err)
	}
	wait("y") // a new watch on the open stream, whose token is gone
	for _, name := range []string{"y", "x"} {
		if err := held[name].Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-got[name]:
			if err != nil {
				t.Errorf("waiting for %s across the token's loss: %v", name, err)
			}
		case <-ctx.Done():
			t.Fatalf("the waiter for %s never got the lock", name)
		}
	}
}
