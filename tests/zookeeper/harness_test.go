package zookeeper_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
	"github.com/padlock-go/padlock/padlocktest"
)

// Every fault the suite knows: a harness that stopped implementing one
// fails to compile here, and the suite fails a subtest whose fault is
// missing and not declared.
var (
	_ conformance.Cutter       = (*harness)(nil)
	_ conformance.Killer       = (*harness)(nil)
	_ conformance.Restarter    = (*harness)(nil)
	_ conformance.Blackholer   = (*harness)(nil)
	_ conformance.Stopper      = (*harness)(nil)
	_ conformance.SilentOpener = (*harness)(nil)
	_ conformance.Failoverer   = (*harness)(nil)
	_ conformance.Limited      = (*harness)(nil)
)

// OpenSilent opens a Locker whose every server address is a silent
// endpoint (padlocktest.Silent): no session can be made.
func (h *harness) OpenSilent(ctx context.Context, opts ...padlock.OpenOption) (*padlock.Locker, error) {
	return h.proxies.OpenSilent(ctx, len(h.ens.Nodes()), func(addrs string) string {
		u := "zk://" + addrs + h.root
		if h.query != "" {
			u += "?" + h.query
		}
		return u
	}, opts...)
}

// Unsupported: a standalone server cannot fail over.
func (h *harness) Unsupported() map[conformance.Feature]string {
	if len(h.ens.Nodes()) > 1 {
		return nil
	}
	return map[conformance.Feature]string{
		conformance.FeatureFailover: "a standalone server; TestConformanceEnsemble fails its three-server ensemble's leader over",
	}
}

// Failover kills the ensemble's leader, waits until the others elected a
// new one, then starts the old leader again and waits until it follows.
func (h *harness) Failover(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	nodes := h.ens.Nodes()
	if len(nodes) < 3 {
		return fmt.Errorf("%w: %d servers cannot fail over", errors.ErrUnsupported, len(nodes))
	}
	leader := -1
	for i, z := range nodes {
		if m, err := padlocktest.ZooKeeperMode(ctx, z.Addr); err == nil && m == "leader" {
			leader = i
		}
	}
	if leader < 0 {
		return errors.New("no server says it leads")
	}
	if err := nodes[leader].Kill(); err != nil {
		return err
	}
	serving := func(skip int) error {
		return conformance.Poll(ctx, 50*time.Millisecond, func() bool {
			leaders, followers := 0, 0
			for i, z := range nodes {
				if i == skip {
					continue
				}
				switch m, _ := padlocktest.ZooKeeperMode(ctx, z.Addr); strings.TrimSpace(m) {
				case "leader":
					leaders++
				case "follower":
					followers++
				}
			}
			want := len(nodes) - 1
			if skip < 0 {
				want = len(nodes)
			}
			return leaders == 1 && leaders+followers == want
		})
	}
	if err := serving(leader); err != nil {
		// Say what each server was doing, and start the killed one again,
		// so that the package's later tests find an ensemble.
		var state []string
		for i, z := range nodes {
			if i != leader {
				m, merr := padlocktest.ZooKeeperMode(context.WithoutCancel(ctx), z.Addr)
				state = append(state, fmt.Sprintf("%s: mode %q (%v); log ends:\n%s", z.Addr, m, merr, z.LogTail()))
			}
		}
		serr := nodes[leader].Start(context.WithoutCancel(ctx))
		return fmt.Errorf("no new leader after killing %s: %w (restarting it: %v)\n%s", nodes[leader].Addr, err, serr, strings.Join(state, "\n"))
	}
	if err := nodes[leader].Start(ctx); err != nil {
		return err
	}
	if err := serving(-1); err != nil {
		return fmt.Errorf("%s did not rejoin: %w", nodes[leader].Addr, err)
	}
	return nil
}

func isOpen(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return false
	default:
		return true
	}
}

// packetsReceived reads the server's count of client packets (mntr).
func packetsReceived(t *testing.T, ctx context.Context) int {
	t.Helper()
	out, err := padlocktest.FourLetter(ctx, single.Nodes()[0].Addr, "mntr")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "zk_packets_received\t"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no zk_packets_received in mntr: %q", out)
	return 0
}

// aliveConnections reads the standalone server's count of client
// connections (mntr).
func aliveConnections(t *testing.T, ctx context.Context) int {
	t.Helper()
	out, err := padlocktest.FourLetter(ctx, single.Nodes()[0].Addr, "mntr")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "zk_num_alive_connections\t"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no zk_num_alive_connections in mntr: %q", out)
	return 0
}

// harness puts a toxiproxy proxy per server in front of every Locker, so
// that Cut, Kill and Blackhole can take the ensemble away from one client.
type harness struct {
	t       *testing.T
	ens     *padlocktest.Server
	certs   *padlocktest.Certs // nil: plain text; else zks:// with these
	root    string
	query   string
	inspect *zk.Conn

	proxies padlocktest.Proxies // each Locker's own, one per server
}

type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

func newHarness(t *testing.T, ens *padlocktest.Server, query string) *harness {
	return newTLSHarness(t, ens, nil, query)
}

// newTLSHarness is newHarness over TLS with certs (nil: plain text), for
// a server started with padlocktest.TLS(certs).
func newTLSHarness(t *testing.T, ens *padlocktest.Server, certs *padlocktest.Certs, query string) *harness {
	h := &harness{t: t, ens: ens, certs: certs, root: fmt.Sprintf("/padlock-test/r%d", roots.Add(1)), query: query}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := h.dialInspector(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h.inspect = conn
	return h
}

// dialInspector connects a client of the harness's own to the ensemble
// and waits for its session, within ctx.
func (h *harness) dialInspector(ctx context.Context) (*zk.Conn, error) {
	var servers []string
	for _, z := range h.ens.Nodes() {
		servers = append(servers, z.Addr)
	}
	conn, events, err := zk.Connect(servers, 10*time.Second, zk.WithLogger(quietLogger{}), zk.WithDialer(inspectorDialer(h.t, h.certs)))
	if err != nil {
		return nil, err
	}
	for connected := false; !connected; {
		select {
		case ev := <-events:
			connected = ev.State == zk.StateHasSession
		case <-ctx.Done():
			conn.Close()
			return nil, fmt.Errorf("inspector: no zookeeper session: %w", zk.ErrNoServer)
		}
	}
	go func() {
		for range events {
		}
	}()
	return conn, nil
}

func (h *harness) NewLocker(ctx context.Context, opts ...padlock.OpenOption) (*padlock.Locker, error) {
	var addrs []string
	for _, z := range h.ens.Nodes() {
		addrs = append(addrs, z.Addr)
	}
	ps, err := padlocktest.ProxyEach(addrs...)
	if err != nil {
		return nil, err
	}
	return h.proxies.Open(ctx, h.url, ps, opts...)
}

// url is the harness's URL for hosts: zk://, or zks:// with the test CA
// and client certificate.
func (h *harness) url(hosts string) string {
	u := "zk://" + hosts + h.root
	if h.certs != nil {
		u = "zks://" + hosts + h.root + "?" + tlsQuery(h.certs).Encode()
		if h.query != "" {
			u += "&" + h.query
		}
		return u
	}
	if h.query != "" {
		u += "?" + h.query
	}
	return u
}

// open opens a Locker with the harness TTL, closed when the test ends.
func (h *harness) open(t *testing.T, ctx context.Context) *padlock.Locker {
	return conformance.NewLocker(ctx, t, h, padlock.WithTTL(h.TTL()))
}

// TTL is the suite's lease: 20 ticks, 40 on the ensemble
// (padlocktest.ZooKeeperTTL); the servers grant longer sessions to a test
// that asks for one.
func (h *harness) TTL() time.Duration { return padlocktest.ZooKeeperTTL }

// State lists every queue node under the harness's root; empty parents
// (container nodes the server removes on its own) are not state, nor are
// the records of forced releases (root/forced), kept on purpose.
func (h *harness) State(ctx context.Context) ([]string, error) {
	parents, err := h.children(ctx, h.root)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range parents {
		if p == "forced" {
			continue
		}
		kids, err := h.children(ctx, h.root+"/"+p)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, k := range kids {
			out = append(out, h.root+"/"+p+"/"+k)
		}
	}
	slices.Sort(out)
	return out, nil
}

// children lists path's children with the inspector's connection. After
// a server restart the inspector reconnects on its own schedule (a second
// between attempts): a request it sends meanwhile fails without reaching
// the server, and is sent again, for at most 30 seconds. Once the
// inspector has failed so for 3s, each look is made by a new client of
// its own as well: a rehearsal's inspector did not get back for 16s
// after a restart that had given a new client a session.
func (h *harness) children(ctx context.Context, path string) ([]string, error) {
	var (
		kids  []string
		err   error
		since time.Time // when the inspector's requests began to fail
	)
	unreached := func(err error) bool {
		return errors.Is(err, zk.ErrNoServer) || errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrSessionExpired)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conformance.Poll(wctx, 50*time.Millisecond, func() bool {
		kids, _, err = h.inspect.Children(path)
		if !unreached(err) {
			return true
		}
		if since.IsZero() {
			since = time.Now()
		}
		if time.Since(since) < 3*time.Second {
			return false
		}
		dctx, cancel := context.WithTimeout(wctx, 10*time.Second)
		conn, derr := h.dialInspector(dctx)
		cancel()
		if derr != nil {
			return false
		}
		defer conn.Close()
		kids, _, err = conn.Children(path)
		return !unreached(err)
	})
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if unreached(err) {
		return nil, fmt.Errorf("%w\n%s", err, h.logTails())
	}
	return kids, err
}

// logTails is the end of each server's log and the stacks of its
// client-serving threads, for an error message: why a server gave no
// session. Under load a restarted server was seen logging no connection
// request for a minute while clients dialled it, its serving threads idle:
// the clients' connections had reached it while it started, and it
// neither answered them nor closed them. go-zookeeper waited 66 seconds
// for the answer; the driver and the inspector now bound that wait
// (answerBound).
func (h *harness) logTails() string {
	var logs []string
	for _, z := range h.ens.Nodes() {
		logs = append(logs, fmt.Sprintf("%s's log ends:\n%s\n%s's serving threads:\n%s",
			z.Addr, z.LogTail(), z.Addr, padlocktest.ZooKeeperThreads(z)))
	}
	return strings.Join(logs, "\n")
}

func (h *harness) Cut(_ context.Context, l *padlock.Locker) (func() error, error) {
	return h.proxies.Cut(l), nil
}

func (h *harness) Kill(ctx context.Context, l *padlock.Locker) error {
	_, err := h.Cut(ctx, l)
	return err
}

func (h *harness) Blackhole(ctx context.Context, l *padlock.Locker) (func() error, error) {
	return h.proxies.Blackhole(ctx, l)
}

// RestartServer restarts every server with its data: sessions survive, as
// ZooKeeper persists them.
func (h *harness) RestartServer(ctx context.Context) error {
	for _, z := range h.ens.Nodes() {
		if err := z.Kill(); err != nil {
			return err
		}
	}
	return h.startAll(ctx)
}

func (h *harness) StopServer(ctx context.Context) (func(context.Context) error, error) {
	for _, z := range h.ens.Nodes() {
		if err := z.Kill(); err != nil {
			return nil, err
		}
	}
	return func(ctx context.Context) error { return h.startAll(ctx) }, nil
}

// startAll starts every server at once and waits until a new client
// gets a session. Under load a restarted server was seen answering its
// four-letter words (the start's probe) while it completed no session for
// a minute, old or new; such a start is made again, three times at most.
func (h *harness) startAll(ctx context.Context) error {
	for try := 1; ; try++ {
		if err := startAll(ctx, h.ens); err != nil {
			return err
		}
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		conn, err := h.dialInspector(sctx)
		cancel()
		if err == nil {
			conn.Close()
			return nil
		}
		if try == 3 || ctx.Err() != nil {
			return fmt.Errorf("zookeeper restarted %d times and gave no session: %w", try, err)
		}
		h.t.Logf("zookeeper gave no session within 20s of its start (%v); starting it again\n%s", err, h.logTails())
		for _, z := range h.ens.Nodes() {
			if err := z.Kill(); err != nil {
				return err
			}
		}
	}
}

// startAll starts every server at once (an ensemble needs a quorum to
// serve, so one at a time would wait for the others).
func startAll(ctx context.Context, e *padlocktest.Server) error {
	errs := make(chan error, len(e.Nodes()))
	for _, z := range e.Nodes() {
		go func() { errs <- z.Start(ctx) }()
	}
	var all []error
	for range e.Nodes() {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// IgnoreLeaks leaves the harness's own goroutines (server log readers,
// toxiproxy links) out of the suite's leak check.
func (h *harness) IgnoreLeaks() []goleak.Option { return padlocktest.LeakIgnores() }

func (h *harness) Close() error {
	h.proxies.Close()
	h.inspect.Close()
	return nil
}
