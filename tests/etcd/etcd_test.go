package etcd_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
	_ "github.com/padlock-go/padlock/etcd"
	"github.com/padlock-go/padlock/padlocktest"
)

// The package's tests share one etcd server process; each subtest works
// under its own key prefix.
var (
	server   *padlocktest.Server
	prefixes atomic.Int64
)

func TestMain(m *testing.M) {
	padlocktest.Main(m, func(ctx context.Context) (func(), error) {
		var err error
		server, err = padlocktest.New(ctx, padlocktest.Etcd, padlocktest.Nodes(1))
		if err != nil {
			return nil, err
		}
		return server.Close, nil
	})
}

// harness puts a toxiproxy proxy in front of every Locker's client, so that
// Cut and Kill can take the server away from that client alone.
type harness struct {
	t         *testing.T
	prefix    string
	inspector *clientv3.Client // reads server state directly, not through a proxy
	member    *padlocktest.Node
	url       func(addr, prefix string) string // a Locker's URL, given its proxy's address
	mu        sync.Mutex
	proxy     map[*padlock.Locker]*padlocktest.Proxy
}

func newHarness(t *testing.T, member *padlocktest.Node) *harness {
	inspector, err := clientv3.New(clientv3.Config{Endpoints: []string{member.Addr},
		DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("etcd inspector: %v", err)
	}
	return &harness{t: t, prefix: fmt.Sprintf("/padlock-test/%d", prefixes.Add(1)), member: member,
		inspector: inspector, proxy: map[*padlock.Locker]*padlocktest.Proxy{},
		url: func(addr, prefix string) string { return "etcd://" + addr + prefix }}
}

func (h *harness) NewLocker(ctx context.Context, opts ...padlock.OpenOption) (*padlock.Locker, error) {
	p, err := padlocktest.NewProxy(h.member.Addr)
	if err != nil {
		return nil, err
	}
	l, err := padlock.Open(ctx, h.url(p.Addr(), h.prefix), opts...)
	if err != nil {
		p.Close()
		return nil, err
	}
	h.mu.Lock()
	h.proxy[l] = p
	h.mu.Unlock()
	return l, nil
}

func (h *harness) TTL() time.Duration { return 2 * time.Second } // etcd's minimum lease

func (h *harness) State(ctx context.Context) ([]string, error) {
	resp, err := h.inspector.Get(ctx, h.prefix+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, kv := range resp.Kvs {
		if !strings.HasPrefix(string(kv.Key), h.prefix+"/%forced/") { // records of forced releases, kept on purpose
			keys = append(keys, string(kv.Key))
		}
	}
	return keys, nil
}

func (h *harness) proxyOf(l *padlock.Locker) *padlocktest.Proxy {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.proxy[l]
}

func (h *harness) Cut(_ context.Context, l *padlock.Locker) (func() error, error) {
	p := h.proxyOf(l)
	p.Cut()
	return p.Restore, nil
}

func (h *harness) Blackhole(ctx context.Context, l *padlock.Locker) (func() error, error) {
	return h.proxyOf(l).Blackhole(ctx)
}

func (h *harness) Kill(_ context.Context, l *padlock.Locker) error {
	h.proxyOf(l).Cut()
	return nil
}

func (h *harness) RestartServer(ctx context.Context) error { return h.member.Restart(ctx) }

func (h *harness) StopServer(ctx context.Context) (func(context.Context) error, error) {
	if err := h.member.Kill(); err != nil {
		return nil, err
	}
	return h.member.Start, nil
}

// IgnoreLeaks leaves the harness's own goroutines (server log readers,
// toxiproxy links) out of the suite's leak check.
func (h *harness) IgnoreLeaks() []goleak.Option { return padlocktest.LeakIgnores() }

func (h *harness) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range h.proxy {
		p.Close()
	}
	return h.inspector.Close()
}

func TestConformance(t *testing.T) {
	conformance.Run(t, func(t *testing.T) conformance.Harness { return newHarness(t, server.Nodes()[0]) })
}
