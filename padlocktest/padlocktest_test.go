package padlocktest_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock"
	_ "github.com/padlock-go/padlock/mysqlpg"
	"github.com/padlock-go/padlock/padlocktest"
	_ "github.com/padlock-go/padlock/zookeeper"
)

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// lockRoundTrip opens a Locker on url and checks that it excludes: two
// Lockers on one name never hold it at once, and tokens increase.
func lockRoundTrip(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	var ls []*padlock.Locker
	for range 2 {
		l, err := padlock.Open(ctx, url)
		if err != nil {
			t.Fatalf("Open(%s): %v", padlock.RedactURL(url), err)
		}
		t.Cleanup(func() { l.Close() })
		ls = append(ls, l)
	}
	first, err := ls[0].Lock(ctx, "padlocktest")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ls[1].TryLock(ctx, "padlocktest"); !errors.Is(err, padlock.ErrNotAcquired) {
		t.Fatalf("a second Locker took a held lock: %v", err)
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	second, err := ls[1].Lock(ctx, "padlocktest")
	if err != nil {
		t.Fatal(err)
	}
	if second.Token() <= first.Token() {
		t.Errorf("tokens %d then %d, want increasing", first.Token(), second.Token())
	}
	if err := second.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// Every kind starts with the local provider, and its URL reaches a server
// that padlock locks on. (The kinds' own behaviour is the backends' test
// packages' subject, all of which run on padlocktest.)
func TestEveryKind(t *testing.T) {
	for _, kind := range padlocktest.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			srv := padlocktest.Start(t, kind, padlocktest.Provider(padlocktest.ProviderLocal))
			if srv.Kind() != kind || srv.Provider() != padlocktest.ProviderLocal {
				t.Errorf("Kind, Provider = %s, %s", srv.Kind(), srv.Provider())
			}
			want := 1
			switch kind {
			case padlocktest.RedLock, padlocktest.RedisCluster:
				want = 3
			case padlocktest.RedisSentinel:
				want = 2
				if len(srv.Sentinels()) != 1 {
					t.Errorf("%d sentinels, want 1", len(srv.Sentinels()))
				}
			}
			if len(srv.Nodes()) != want {
				t.Errorf("%d nodes, want %d", len(srv.Nodes()), want)
			}
			lockRoundTrip(t, testCtx(t, 2*time.Minute), srv.URL())
		})
	}
}

// dialRefused checks that nothing accepts connections at addr.
func dialRefused(t *testing.T, addr string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err == nil {
		c.Close()
		t.Fatalf("%s accepts connections", addr)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s: %v, want connection refused", addr, err)
	}
}

// A node killed refuses connections and is not Running; started again it
// serves; paused, it keeps connections but answers nothing until resumed.
func TestNodeFaults(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	srv := padlocktest.Start(t, padlocktest.Redis)
	n := srv.Nodes()[0]
	rdb := goredis.NewClient(&goredis.Options{Addr: n.Addr, MaxRetries: -1, ContextTimeoutEnabled: true})
	defer rdb.Close()
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}

	if err := n.Pause(); err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err := rdb.Ping(pctx).Err()
	cancel()
	if err == nil {
		t.Fatal("a paused server answered")
	}
	if !n.Running() {
		t.Error("a paused node is not Running")
	}
	if err := n.Resume(); err != nil {
		t.Fatal(err)
	}
	padlocktest.WaitFor(t, "an answer after Resume", time.Minute, func() bool { return rdb.Ping(ctx).Err() == nil })

	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	if n.Running() {
		t.Error("a killed node is Running")
	}
	dialRefused(t, n.Addr)
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if !n.Running() {
		t.Error("a started node is not Running")
	}
	// The same address, and no persistence: the key is gone.
	if err := rdb.Get(ctx, "k").Err(); !errors.Is(err, goredis.Nil) {
		t.Errorf("after a restart without persistence: GET k = %v, want nil", err)
	}
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Get(ctx, "k").Err(); !errors.Is(err, goredis.Nil) {
		t.Errorf("after Restart: GET k = %v, want nil (a new process)", err)
	}

	// Stop shuts the node down: not Running, refusing; Start brings it back.
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	if n.Running() {
		t.Error("a stopped node is Running")
	}
	dialRefused(t, n.Addr)
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(ctx); err == nil {
		t.Error("Start of a running node: no error")
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Errorf("after Stop and Start: %v", err)
	}
}

// A Proxy is one client's path: Cut refuses and closes its connections
// alone, Blackhole silences them, DropAnswers lets requests through but
// not their answers, Delay holds requests and delivers them late; each
// acts on every node's link, and each heals.
func TestProxy(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	srv := padlocktest.Start(t, padlocktest.RedLock)
	p := srv.Proxy(t)
	addrs := strings.Split(p.Addr(), ",")
	if len(addrs) != len(srv.Nodes()) {
		t.Fatalf("proxy addresses %q, want one per node", p.Addr())
	}
	var via, direct []*goredis.Client
	for i, addr := range addrs {
		via = append(via, goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true}))
		direct = append(direct, goredis.NewClient(&goredis.Options{Addr: srv.Nodes()[i].Addr}))
	}
	t.Cleanup(func() {
		for i := range via {
			via[i].Close()
			direct[i].Close()
		}
	})
	answers := func(c *goredis.Client) bool { return c.Ping(ctx).Err() == nil }
	healed := func(what string) {
		t.Helper()
		for i, c := range via {
			padlocktest.WaitFor(t, fmt.Sprintf("an answer through link %d after %s", i, what), time.Minute, func() bool { return answers(c) })
		}
	}
	// silent checks that every link gives no answer and no error but a
	// timeout: the connection stays open.
	silent := func(what string, cmd func(context.Context, *goredis.Client) error) {
		t.Helper()
		for i, c := range via {
			cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			err := cmd(cctx, c)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) && !isTimeout(err) {
				t.Errorf("%s, link %d: %v, want a timeout", what, i, err)
			}
		}
	}
	healed("the start")

	p.Cut()
	for i, addr := range addrs {
		dialRefused(t, addr)
		if err := direct[i].Ping(ctx).Err(); err != nil {
			t.Errorf("node %d itself stopped answering during a Cut: %v", i, err)
		}
	}
	if err := p.Restore(); err != nil {
		t.Fatal(err)
	}
	healed("Restore")

	heal, err := p.Blackhole(ctx)
	if err != nil {
		t.Fatal(err)
	}
	silent("Blackhole", func(ctx context.Context, c *goredis.Client) error { return c.Ping(ctx).Err() })
	if err := heal(); err != nil {
		t.Fatal(err)
	}
	healed("the blackhole")

	heal, err = p.DropAnswers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	silent("DropAnswers", func(ctx context.Context, c *goredis.Client) error {
		return c.Set(ctx, "dropped", "applied", 0).Err()
	})
	for i, c := range direct {
		padlocktest.WaitFor(t, fmt.Sprintf("the unanswered SET applied on node %d", i), time.Minute, func() bool {
			return c.Get(ctx, "dropped").Val() == "applied"
		})
	}
	if err := heal(); err != nil {
		t.Fatal(err)
	}
	healed("DropAnswers")

	// Delay holds a request past the client's own deadline; healing
	// delivers it, late, although the client gave up.
	heal, err = p.Delay(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	silent("Delay", func(ctx context.Context, c *goredis.Client) error {
		return c.Set(ctx, "delayed", "applied", 0).Err()
	})
	for i, c := range direct {
		if v, err := c.Get(ctx, "delayed").Result(); !errors.Is(err, goredis.Nil) {
			t.Errorf("node %d: the delayed SET arrived before the delay ended: %q, %v", i, v, err)
		}
	}
	if err := heal(); err != nil {
		t.Fatal(err)
	}
	for i, c := range direct {
		padlocktest.WaitFor(t, fmt.Sprintf("the abandoned SET applied on node %d once the delay ended", i), time.Minute, func() bool {
			return c.Get(ctx, "delayed").Val() == "applied"
		})
	}
	healed("Delay")
}

// isTimeout reports a network timeout (go-redis's read deadline).
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Bad kinds, options and providers are errors that errors.Is matches, and
// say what was wrong; nothing is started.
func TestInvalid(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	for _, c := range []struct {
		kind padlocktest.Kind
		opts []padlocktest.Option
		want error
		says string
	}{
		{"memcached", nil, padlocktest.ErrInvalid, `kind "memcached"`},
		{padlocktest.Redis, []padlocktest.Option{padlocktest.Nodes(3)}, padlocktest.ErrInvalid, "Nodes(3)"},
		{padlocktest.Etcd, []padlocktest.Option{padlocktest.Nodes(0)}, padlocktest.ErrInvalid, "Nodes(0)"},
		{padlocktest.RedisCluster, []padlocktest.Option{padlocktest.Nodes(2)}, padlocktest.ErrInvalid, "at least three masters"},
		{padlocktest.RedLock, []padlocktest.Option{padlocktest.TLS(&padlocktest.Certs{})}, padlocktest.ErrUnsupported, "TLS on redlock"},
		{padlocktest.ZooKeeper, []padlocktest.Option{padlocktest.TLS(&padlocktest.Certs{}), padlocktest.Partitions()}, padlocktest.ErrUnsupported, "TLS with Partitions on zookeeper"},
		{padlocktest.Etcd, []padlocktest.Option{padlocktest.RedisUsers("a on")}, padlocktest.ErrInvalid, "RedisUsers on etcd"},
		{padlocktest.Redis, []padlocktest.Option{padlocktest.EtcdAuthTokenTTL(3)}, padlocktest.ErrInvalid, "EtcdAuthTokenTTL on redis"},
		{padlocktest.Redis, []padlocktest.Option{padlocktest.Provider("vagrant")}, padlocktest.ErrInvalid, `provider "vagrant"`},
		{padlocktest.Etcd, []padlocktest.Option{padlocktest.FakeClock()}, padlocktest.ErrInvalid, "FakeClock on etcd"},
		{padlocktest.Redis, []padlocktest.Option{padlocktest.Partitions()}, padlocktest.ErrInvalid, "Partitions on redis"},
		{padlocktest.RedisSentinel, []padlocktest.Option{padlocktest.Nodes(1)}, padlocktest.ErrInvalid, "at least one replica"},
		{padlocktest.Etcd, []padlocktest.Option{padlocktest.RedisAppendOnly()}, padlocktest.ErrInvalid, "RedisAppendOnly on etcd"},
		{padlocktest.Redis, []padlocktest.Option{padlocktest.RedisAppendOnly(), padlocktest.RedisUsers("a on")}, padlocktest.ErrUnsupported, "RedisAppendOnly with TLS or RedisUsers"},
	} {
		s, err := padlocktest.New(ctx, c.kind, c.opts...)
		if err == nil {
			s.Close()
		}
		if !errors.Is(err, c.want) || !strings.Contains(fmt.Sprint(err), c.says) {
			t.Errorf("New(%s): %v, want %v saying %q", c.kind, err, c.want, c.says)
		}
	}
}

// With neither the binaries nor a container engine, auto says so, naming
// both ways to fix it, as ErrMissing (which Start turns into a skip unless
// PADLOCK_REQUIRE_SERVERS=1). It runs in a process of its own:
// testcontainers-go keeps its first look at the engine for the process.
func TestAutoWithNothing(t *testing.T) {
	if os.Getenv("PADLOCKTEST_AUTO_CHILD") == "1" {
		_, err := padlocktest.New(testCtx(t, time.Minute), padlocktest.Redis, padlocktest.Provider(padlocktest.ProviderAuto))
		fmt.Printf("ErrMissing=%v\n%v\n", errors.Is(err, padlocktest.ErrMissing), err)
		// A kind containers cannot run either: missing (a skip), not
		// unsupported (a failure).
		_, err = padlocktest.New(testCtx(t, time.Minute), padlocktest.RedisCluster, padlocktest.Provider(padlocktest.ProviderAuto))
		fmt.Printf("cluster ErrMissing=%v\n%v\n", errors.Is(err, padlocktest.ErrMissing), err)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAutoWithNothing$")
	cmd.Env = append(os.Environ(), "PADLOCKTEST_AUTO_CHILD=1", "PATH="+t.TempDir(),
		"DOCKER_HOST=unix://"+t.TempDir()+"/no-engine.sock", "TESTCONTAINERS_RYUK_DISABLED=true",
		"HOME="+t.TempDir()) // no ~/.testcontainers.properties
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, says := range []string{"ErrMissing=true", "redis-server", "apt-get install redis-server", "PADLOCK_SERVERS=containers",
		"cluster ErrMissing=true"} {
		if !strings.Contains(string(out), says) {
			t.Errorf("output %q does not say %q", out, says)
		}
	}
}

// A user's test of their own code: an order is processed by one worker at
// a time however many race for it, on a real Redis and on embedded etcd.
func TestUserStyle(t *testing.T) {
	for _, kind := range []padlocktest.Kind{padlocktest.Redis, padlocktest.Etcd} {
		t.Run(string(kind), func(t *testing.T) {
			srv := padlocktest.Start(t, kind)
			ctx := testCtx(t, 2*time.Minute)
			l, err := padlock.Open(ctx, srv.URL())
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			var inside, overlaps, done atomic.Int32
			process := func() error {
				lock, err := l.Lock(ctx, "orders/42", padlock.WithWait(time.Minute))
				if err != nil {
					return err
				}
				defer lock.Unlock(ctx)
				if inside.Add(1) > 1 {
					overlaps.Add(1)
				}
				time.Sleep(time.Millisecond) // the work, inside the lock
				inside.Add(-1)
				done.Add(1)
				return nil
			}
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					if err := process(); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			if overlaps.Load() != 0 || done.Load() != 8 {
				t.Errorf("%d overlaps, %d of 8 processed", overlaps.Load(), done.Load())
			}
		})
	}
}

// A ZooKeeper started with TLS serves padlock's zks:// URL, whose
// parameters carry the client certificate, on its TLS port only: the port
// answers nothing in plain text. Started again after a kill, it is ready
// (its readiness probe speaks TLS) and serves the same URL.
func TestZooKeeperTLS(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	srv := padlocktest.Start(t, padlocktest.ZooKeeper, padlocktest.TLS(padlocktest.NewCerts(t)),
		padlocktest.Provider(padlocktest.ProviderLocal))
	if !strings.HasPrefix(srv.URL(), "zks://") {
		t.Fatalf("URL %s, want zks://", srv.URL())
	}
	lockRoundTrip(t, ctx, srv.URL())
	node := srv.Nodes()[0]
	if out, _ := padlocktest.FourLetter(ctx, node.Addr, "srvr"); strings.Contains(out, "Mode: ") {
		t.Errorf("the TLS port answered srvr in plain text: %q", out)
	}
	if err := node.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	lockRoundTrip(t, ctx, srv.URL())
}

// ZooKeeperThreads gets the stacks of a running server's client-serving
// threads from its JVM, which serves on: a lock round trip after it; of a
// paused one, its stopped state.
func TestZooKeeperThreads(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	srv := padlocktest.Start(t, padlocktest.ZooKeeper, padlocktest.Provider(padlocktest.ProviderLocal))
	dump := padlocktest.ZooKeeperThreads(srv.Nodes()[0])
	for _, want := range []string{"state ", `"NIOServerCxnFactory.AcceptThread`, `"SessionTracker`, "java.lang.Thread.State"} {
		if !strings.Contains(dump, want) {
			t.Errorf("the thread dump has no %s:\n%s", want, dump)
		}
	}
	// A stopped server prints no dump: its state says why.
	node := srv.Nodes()[0]
	if err := node.Pause(); err != nil {
		t.Fatal(err)
	}
	dump = padlocktest.ZooKeeperThreads(node)
	if err := node.Resume(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(dump, "state T") || !strings.Contains(dump, "no thread dump") {
		t.Errorf("a paused server's dump = %q, want its state T and no thread dump", dump)
	}
	lockRoundTrip(t, ctx, srv.URL())
}
