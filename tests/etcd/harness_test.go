package etcd_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
	"github.com/padlock-go/padlock/padlocktest"
)

// harness puts a toxiproxy proxy in front of every Locker's client, so that
// Cut and Kill can take the server away from that client alone.
type harness struct {
	t         *testing.T
	prefix    string
	inspector *clientv3.Client // reads server state directly, not through a proxy
	member    *padlocktest.Node
	url       func(addr, prefix string) string // a Locker's URL, given its proxy's address
	proxies   padlocktest.Proxies              // each Locker's own
}

func newHarness(t *testing.T, member *padlocktest.Node) *harness {
	inspector, err := clientv3.New(clientv3.Config{Endpoints: []string{member.Addr},
		DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("etcd inspector: %v", err)
	}
	return &harness{t: t, prefix: fmt.Sprintf("/padlock-test/%d", prefixes.Add(1)), member: member,
		inspector: inspector,
		url:       func(addr, prefix string) string { return "etcd://" + addr + prefix }}
}

func (h *harness) NewLocker(ctx context.Context, opts ...padlock.OpenOption) (*padlock.Locker, error) {
	p, err := padlocktest.NewProxy(h.member.Addr)
	if err != nil {
		return nil, err
	}
	return h.proxies.Open(ctx, h.lockerURL, []*padlocktest.Proxy{p}, opts...)
}

// lockerURL is a Locker's URL, given its proxies' addresses.
func (h *harness) lockerURL(addrs string) string { return h.url(addrs, h.prefix) }

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

func (h *harness) Cut(_ context.Context, l *padlock.Locker) (func() error, error) {
	return h.proxies.Cut(l), nil
}

func (h *harness) Blackhole(ctx context.Context, l *padlock.Locker) (func() error, error) {
	return h.proxies.Blackhole(ctx, l)
}

func (h *harness) Kill(_ context.Context, l *padlock.Locker) error {
	h.proxies.Cut(l)
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
	h.proxies.Close()
	return h.inspector.Close()
}

// etcdTest is a harness with the helpers these tests share.
func etcdTest(t *testing.T) (*harness, context.Context) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	h := newHarness(t, server.Nodes()[0])
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(func() {
		cancel()
		h.Close()
		if !t.Failed() {
			goleak.VerifyNone(t, append(padlocktest.LeakIgnores(), ignore)...)
		}
	})
	return h, ctx
}

// recorder is a slog handler that keeps every record's message.
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }

func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, rec.Message)
	return nil
}

func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }

func (r *recorder) WithGroup(string) slog.Handler { return r }

func (r *recorder) messages() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.msgs)
}

func (r *recorder) has(sub string) bool {
	return slices.ContainsFunc(r.messages(), func(m string) bool { return strings.Contains(m, sub) })
}

// leaseRenewals reads the server's count of lease keep-alives.
func leaseRenewals(t *testing.T, ctx context.Context) int {
	return int(metric(t, ctx, server.Nodes()[0].Addr, "etcd_debugging_lease_renewed_total "))
}

// metric sums the values of the server's metrics lines that begin with
// prefix (a name, with its labels' opening brace or a space) and contain
// every one of labels.
func metric(t *testing.T, ctx context.Context, addr, prefix string, labels ...string) float64 {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/metrics", nil)
	req.Close = true // leave no idle connection (and its goroutines) behind
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	found := false
	var sum float64
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), prefix)
		if !ok || !containsAll(line, labels) {
			continue
		}
		f, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatal(err)
		}
		sum += f
		found = true
	}
	if !found {
		t.Fatalf("%s not in the server's metrics", prefix)
	}
	return sum
}

// waitKeys waits until the harness's prefix holds n keys.
func waitKeys(t *testing.T, ctx context.Context, h *harness, n int) {
	t.Helper()
	conformance.WaitState(ctx, t, h, fmt.Sprintf("%d keys", n), 30*time.Second, func(s []string) bool { return len(s) == n })
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// The harness's faults and the backend's optional parts, checked where
// the suite needs them: a harness that stopped implementing one fails.
var (
	_ conformance.Cutter       = (*harness)(nil)
	_ conformance.Killer       = (*harness)(nil)
	_ conformance.Restarter    = (*harness)(nil)
	_ conformance.Blackholer   = (*harness)(nil)
	_ conformance.Stopper      = (*harness)(nil)
	_ conformance.SilentOpener = (*harness)(nil)
	_ conformance.Limited      = (*harness)(nil)
)

// OpenSilent opens a Locker on a silent endpoint (padlocktest.Silent),
// which Open must give up on.
func (h *harness) OpenSilent(ctx context.Context, opts ...padlock.OpenOption) (*padlock.Locker, error) {
	return h.proxies.OpenSilent(ctx, 1, h.lockerURL, opts...)
}

// Unsupported: the suite's server is one member, which cannot fail over.
func (h *harness) Unsupported() map[conformance.Feature]string {
	return map[conformance.Feature]string{
		conformance.FeatureFailover: "one member; TestLeaderFailover kills a three-member cluster's leader under load and checks that tokens keep rising",
	}
}

// waitEmpty waits until nothing is left under the harness's prefix.
func waitEmpty(t *testing.T, h *harness, ctx context.Context) {
	t.Helper()
	padlocktest.WaitFor(t, "no keys left", time.Minute, func() bool { s, err := h.State(ctx); return err == nil && len(s) == 0 })
}
