package redis_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/padlocktest"
)

// The least-privilege ACL padlock needs (docs/security.md): its keys and
// channels only, and the commands its scripts and its client send.
const padlockACL = "~tls*:* &tls*:* +ping +hello +auth +evalsha +eval +get +set +del " +
	"+pexpire +pexpireat +incr +exists +pttl +time +zadd +zrem +zrange +zrangebyscore +zrank +zscore " +
	"+zcard +publish +subscribe +unsubscribe +scan +hset +hget +hdel +hexists +hkeys"

const (
	tlsPassword    = "s3cret-Pw-9f2c"
	adminPassword  = "admin-Pw-77aa"
	readerPassword = "reader-Pw-0b1d"
)

// startTLS starts a TLS-only redis-server with ACL users for one test,
// with certificates made for it, and stops it when the test ends.
func startTLS(t *testing.T) (*padlocktest.Certs, *padlocktest.Node, string) {
	t.Helper()
	needServers(t)
	certs, pwFile := padlocktest.NewCerts(t), padlocktest.SecretFile(t, tlsPassword)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	users := []string{"padlock on >" + tlsPassword + " " + padlockACL,
		"admin on >" + adminPassword + " ~* &* +@all",
		"reader on >" + readerPassword + " ~tls*:* &tls*:* +ping +hello +auth +get"}
	// The conformance harness's Lockers, each its own user with padlock's
	// least privilege, so that CLIENT LIST tells them apart (a client
	// name would need CLIENT SETNAME, which that privilege leaves out).
	for i := range tlsLockerUsers {
		users = append(users, tlsLockerUser(i)+" on >"+tlsPassword+" "+padlockACL)
	}
	g, err := padlocktest.New(ctx, padlocktest.Redis, padlocktest.TLS(certs), padlocktest.RedisUsers(users...))
	if err != nil {
		t.Fatalf("TLS redis-server: %v", err)
	}
	t.Cleanup(g.Close)
	return certs, g.Nodes()[0], pwFile
}

// tlsURL is a rediss:// URL for user with the test CA and client
// certificate, the password in a file (padlock's own user) or in the URL.
func tlsURL(c *padlocktest.Certs, r *padlocktest.Node, user, password, prefix string, extra url.Values) string {
	return tlsURLAt(c, r.Addr, user, password, prefix, extra)
}

// tlsURLAt is tlsURL with the server at addr (a proxy's, say).
func tlsURLAt(c *padlocktest.Certs, addr, user, password, prefix string, extra url.Values) string {
	q := url.Values{"ca": {c.CA}, "cert": {c.ClientCert}, "key": {c.ClientKey}, "prefix": {prefix}}
	for k, v := range extra {
		q[k] = v
	}
	u := url.URL{Scheme: "rediss", Host: addr, Path: "/", RawQuery: q.Encode()}
	if password != "" {
		u.User = url.UserPassword(user, password)
	} else {
		u.User = url.User(user)
	}
	return u.String()
}

func adminClient(t *testing.T, c *padlocktest.Certs, r *padlocktest.Node) *goredis.Client {
	t.Helper()
	cfg, err := c.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	return goredis.NewClient(&goredis.Options{Addr: r.Addr, Username: "admin", Password: adminPassword, TLSConfig: cfg})
}

// tlsLockerUsers is how many users with padlock's ACL startTLS makes for
// the conformance harness: more than any subtest opens Lockers.
const tlsLockerUsers = 32

func tlsLockerUser(i int) string { return fmt.Sprintf("padlock-%d", i+1) }

// tlsHarness runs the conformance suite over TLS as least-privileged
// users, with their password read from a file. Each Locker reaches the
// server through a proxy of its own (TLS passes through it), for the
// faults, and logs in as a user of its own (of startTLS's, which a
// restarted server still has), so that the server's CLIENT LIST shows
// which Locker waits.
type tlsHarness struct {
	c      *padlocktest.Certs
	r      *padlocktest.Node
	pwFile string
	prefix string
	fair   string
	admin  *goredis.Client

	mu      sync.Mutex
	users   map[*padlock.Locker]string
	proxies padlocktest.Proxies // each Locker's own (and OpenSilent's)
}

func newTLSHarness(t *testing.T, c *padlocktest.Certs, r *padlocktest.Node, pwFile, prefix, fair string) *tlsHarness {
	return &tlsHarness{c: c, r: r, pwFile: pwFile, prefix: prefix, fair: fair, admin: adminClient(t, c, r),
		users: map[*padlock.Locker]string{}}
}

// url is the URL of a Locker that logs in as user and dials addr.
func (h *tlsHarness) url(addr, user string) string {
	return tlsURLAt(h.c, addr, user, "", h.prefix, url.Values{"password_file": {h.pwFile}, "fair": {h.fair}})
}

func (h *tlsHarness) NewLocker(ctx context.Context, opts ...padlock.OpenOption) (*padlock.Locker, error) {
	h.mu.Lock()
	n := len(h.users)
	h.mu.Unlock()
	if n >= tlsLockerUsers {
		return nil, fmt.Errorf("the TLS harness has %d users, for as many Lockers", tlsLockerUsers)
	}
	user := tlsLockerUser(n)
	p, err := padlocktest.NewProxy(h.r.Addr)
	if err != nil {
		return nil, err
	}
	l, err := h.proxies.Open(ctx, func(addr string) string { return h.url(addr, user) }, []*padlocktest.Proxy{p}, opts...)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.users[l] = user
	h.mu.Unlock()
	return l, nil
}

// OpenSilent opens a Locker on a silent endpoint: its TLS handshake gets
// no answer.
func (h *tlsHarness) OpenSilent(ctx context.Context, opts ...padlock.OpenOption) (*padlock.Locker, error) {
	p, err := padlocktest.Silent(1)
	if err != nil {
		return nil, err
	}
	h.proxies.Keep(nil, p)
	return padlock.Open(ctx, h.url(p.Addr(), "padlock"), opts...)
}

// TTL is longer than the plain harness's 2s: each Locker's requests go
// through TLS and a proxy of its own, and ManyLocks renews 1,000 holds
// within each renewal period on a loaded 2-core machine (with 2s, a batch
// was once still unanswered at the lease deadline in a full run).
func (h *tlsHarness) TTL() time.Duration { return 3 * time.Second }

// Waiting reports whether one of l's connections is subscribed to a
// wake-up channel (see harness.Waiting).
func (h *tlsHarness) Waiting(ctx context.Context, l *padlock.Locker) (bool, error) {
	h.mu.Lock()
	user := h.users[l]
	h.mu.Unlock()
	return subscribed(ctx, []*goredis.Client{h.admin}, "user", user)
}

// Cut closes l's connections and refuses new ones.
func (h *tlsHarness) Cut(_ context.Context, l *padlock.Locker) (func() error, error) {
	return h.proxies.Cut(l), nil
}

// Kill cuts l off for good: its holds expire with their leases.
func (h *tlsHarness) Kill(_ context.Context, l *padlock.Locker) error {
	h.proxies.Cut(l)
	return nil
}

func (h *tlsHarness) Blackhole(ctx context.Context, l *padlock.Locker) (func() error, error) {
	return h.proxies.Blackhole(ctx, l)
}

// RestartServer restarts the server without persistence: the holds are
// gone; the users, from its configuration file, are back.
func (h *tlsHarness) RestartServer(ctx context.Context) error { return h.r.Restart(ctx) }

func (h *tlsHarness) StopServer(ctx context.Context) (func(context.Context) error, error) {
	if err := h.r.Kill(); err != nil {
		return nil, err
	}
	return h.r.Start, nil
}

func (h *tlsHarness) State(ctx context.Context) ([]string, error) {
	// As the main harness: each lock, each waiter in a fair queue, each
	// reader and permit.
	return stateOf(ctx, []*goredis.Client{h.admin}, h.prefix)
}

func (h *tlsHarness) IgnoreLeaks() []goleak.Option { return padlocktest.LeakIgnores() }

func (h *tlsHarness) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.proxies.Close()
	return h.admin.Close()
}

// RedLock over TLS: every master gets the URL's certificates and password
// file, and verifies its own host.
func TestRedLockTLS(t *testing.T) {
	c, first, pwFile := startTLS(t)
	hosts := []string{first.Addr}
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		g, err := padlocktest.New(ctx, padlocktest.Redis, padlocktest.TLS(c), padlocktest.RedisUsers("padlock on >"+tlsPassword+" "+padlockACL))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(g.Close)
		hosts = append(hosts, g.Nodes()[0].Addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	q := url.Values{"ca": {c.CA}, "cert": {c.ClientCert}, "key": {c.ClientKey}, "password_file": {pwFile}, "prefix": {"tlsrl"}}
	l, err := padlock.Open(ctx, "redlock://padlock@"+strings.Join(hosts, ",")+"/?"+q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lk, err := l.Lock(padlock.WithOwner(ctx, "batch"), "rl")
	if err != nil {
		t.Fatal(err)
	}
	if hs, err := l.Holders(ctx, ""); err != nil || len(hs) != 1 || hs[0].Owner != "batch" {
		t.Errorf("RedLock holders over TLS = %+v, %v", hs, err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
