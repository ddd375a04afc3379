package padlocktest_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
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
			if kind == padlocktest.RedLock || kind == padlocktest.RedisCluster {
				want = 3
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
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Errorf("after Restart: %v", err)
	}
}

// A Proxy is one client's path: Cut refuses and closes its connections
// alone, Blackhole silences them, DropAnswers lets requests through but
// not their answers; each heals.
func TestProxy(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	srv := padlocktest.Start(t, padlocktest.RedLock)
	p := srv.Proxy(t)
	if got := len(strings.Split(p.Addr(), ",")); got != 3 {
		t.Fatalf("proxy addresses %q, want one per node", p.Addr())
	}
	for i, addr := range strings.Split(p.Addr(), ",") {
		viaProxy := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true})
		direct := goredis.NewClient(&goredis.Options{Addr: srv.Nodes()[i].Addr})
		t.Cleanup(func() { viaProxy.Close(); direct.Close() })
		if err := viaProxy.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if i != 0 {
			continue
		}

		p.Cut()
		dialRefused(t, addr)
		if err := direct.Ping(ctx).Err(); err != nil {
			t.Errorf("the server itself stopped answering during a Cut: %v", err)
		}
		if err := p.Restore(); err != nil {
			t.Fatal(err)
		}
		padlocktest.WaitFor(t, "an answer after Restore", time.Minute, func() bool { return viaProxy.Ping(ctx).Err() == nil })

		heal, err := p.Blackhole(ctx)
		if err != nil {
			t.Fatal(err)
		}
		bctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		err = viaProxy.Ping(bctx).Err()
		cancel()
		if err == nil {
			t.Fatal("an answer through a blackhole")
		}
		if err := heal(); err != nil {
			t.Fatal(err)
		}
		padlocktest.WaitFor(t, "an answer after the blackhole", time.Minute, func() bool { return viaProxy.Ping(ctx).Err() == nil })

		heal, err = p.DropAnswers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		err = viaProxy.Set(dctx, "dropped", "applied", 0).Err()
		cancel()
		if err == nil {
			t.Fatal("an answer came through DropAnswers")
		}
		padlocktest.WaitFor(t, "the unanswered SET applied", time.Minute, func() bool {
			return direct.Get(ctx, "dropped").Val() == "applied"
		})
		if err := heal(); err != nil {
			t.Fatal(err)
		}
		padlocktest.WaitFor(t, "an answer after DropAnswers", time.Minute, func() bool { return viaProxy.Ping(ctx).Err() == nil })
	}
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
		{padlocktest.ZooKeeper, []padlocktest.Option{padlocktest.TLS(&padlocktest.Certs{})}, padlocktest.ErrUnsupported, "TLS on zookeeper"},
		{padlocktest.Etcd, []padlocktest.Option{padlocktest.RedisUsers("a on")}, padlocktest.ErrInvalid, "RedisUsers on etcd"},
		{padlocktest.Redis, []padlocktest.Option{padlocktest.EtcdAuthTokenTTL(3)}, padlocktest.ErrInvalid, "EtcdAuthTokenTTL on redis"},
		{padlocktest.Redis, []padlocktest.Option{padlocktest.Provider("vagrant")}, padlocktest.ErrInvalid, `provider "vagrant"`},
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
// PADLOCK_REQUIRE_SERVERS=1).
func TestAutoWithNothing(t *testing.T) {
	if os.Getenv(padlocktest.ServersEnv) == padlocktest.ProviderContainers {
		t.Skip("a container engine is expected to answer")
	}
	t.Setenv("PATH", t.TempDir())
	t.Setenv("DOCKER_HOST", "unix://"+t.TempDir()+"/no-engine.sock")
	t.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	_, err := padlocktest.New(testCtx(t, time.Minute), padlocktest.Redis, padlocktest.Provider(padlocktest.ProviderAuto))
	if !errors.Is(err, padlocktest.ErrMissing) {
		t.Fatalf("New with nothing installed: %v, want ErrMissing", err)
	}
	for _, says := range []string{"redis-server", "apt-get install redis-server", "PADLOCK_SERVERS=containers"} {
		if !strings.Contains(err.Error(), says) {
			t.Errorf("error %q does not say %q", err, says)
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
