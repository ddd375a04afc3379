package redis_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredis "github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/bench/benchutil"
	"github.com/padlock-go/padlock/padlocktest"
	"github.com/padlock-go/padlock/redis"
)

// BenchmarkUncontendedSideBySide is the hot-path issue's uncontended row:
// padlock, redsync, bsm/redislock and the floor (SET NX PX, then DEL) take
// turns, cycle by cycle, on one server.
func BenchmarkUncontendedSideBySide(b *testing.B) {
	ctx := context.Background()
	addr := redisAddr(b)
	l := benchutil.Open(b, "redis://"+addr+"/")
	rs := redsync.New(redsyncgoredis.NewPool(benchClient(b, addr)))
	bsm := redislock.New(benchClient(b, addr))
	raw := benchClient(b, addr)
	benchutil.SideBySide(b,
		benchutil.Variant{Name: "padlock", Op: benchutil.Cycle(ctx, l, "bench/sbs")},
		benchutil.Variant{Name: "redsync", Op: func() error {
			m := rs.NewMutex("bench-native/sbs-redsync")
			if err := m.LockContext(ctx); err != nil {
				return err
			}
			_, err := m.UnlockContext(ctx)
			return err
		}},
		benchutil.Variant{Name: "bsm-redislock", Op: func() error {
			lk, err := bsm.Obtain(ctx, "bench-native/sbs-bsm", 10*time.Second, nil)
			if err != nil {
				return err
			}
			return lk.Release(ctx)
		}},
		benchutil.Variant{Name: "setnx+del", Op: func() error {
			if err := raw.SetNX(ctx, "bench-floor/sbs", "x", 10*time.Second).Err(); err != nil {
				return err
			}
			return raw.Del(ctx, "bench-floor/sbs").Err()
		}},
	)
}

// BenchmarkContended is the hot-path issue's contended row: eight clients,
// each holding the lock 1ms and thinking 1ms between acquisitions.
func BenchmarkContended(b *testing.B) {
	ctx := context.Background()
	addr := redisAddr(b)
	load := benchutil.Load{Clients: 8, Hold: time.Millisecond, Think: time.Millisecond}
	for _, fair := range []string{"fair=true", ""} {
		name := "padlock"
		if fair != "" {
			name += "-fair"
		}
		b.Run(name, func(b *testing.B) {
			var ls []*padlock.Locker
			for range load.Clients {
				ls = append(ls, benchutil.Open(b, "redis://"+addr+"/?"+fair))
			}
			admin := benchClient(b, addr)
			before := serverCommands(b, ctx, admin, "evalsha", "eval")
			benchutil.ContendLoad(b, load, func(i int) (func() error, error) {
				lk, err := ls[i].Lock(ctx, "bench/contended")
				if err != nil {
					return nil, err
				}
				return func() error { return lk.Unlock(ctx) }, nil
			})
			// Scripts per acquisition, beyond its one release: the tries,
			// of which all but one lost a race (or refreshed a place).
			scripts := serverCommands(b, ctx, admin, "evalsha", "eval") - before
			b.ReportMetric(float64(scripts)/float64(b.N)-1, "tries/acq")
		})
	}
	b.Run("bsm-redislock-poll10ms", func(b *testing.B) {
		var cs []*redislock.Client
		for range load.Clients {
			cs = append(cs, redislock.New(benchClient(b, addr)))
		}
		opt := &redislock.Options{RetryStrategy: redislock.LinearBackoff(10 * time.Millisecond)}
		benchutil.ContendLoad(b, load, func(i int) (func() error, error) {
			lk, err := cs[i].Obtain(ctx, "bench-native/contended-bsm", 10*time.Second, opt)
			if err != nil {
				return nil, err
			}
			return func() error { return lk.Release(ctx) }, nil
		})
	})
	b.Run("redsync", func(b *testing.B) {
		var rs []*redsync.Redsync
		for range load.Clients {
			rs = append(rs, redsync.New(redsyncgoredis.NewPool(benchClient(b, addr))))
		}
		benchutil.ContendLoad(b, load, func(i int) (func() error, error) {
			m := rs[i].NewMutex("bench-native/contended-redsync", redsync.WithTries(10000))
			if err := m.LockContext(ctx); err != nil {
				return nil, err
			}
			return func() error { _, err := m.UnlockContext(ctx); return err }, nil
		})
	})
}

// BenchmarkCommandsPerCycle counts, per uncontended Lock+Unlock, the
// round trips the client waits for (a go-redis hook on its client: each
// command or pipeline sent) and the commands the server runs, those inside
// scripts included (INFO commandstats counts them), for padlock in both
// modes and the peers.
func BenchmarkCommandsPerCycle(b *testing.B) {
	ctx := context.Background()
	addr := redisAddr(b)
	admin := benchClient(b, addr)
	count := func(b *testing.B, trips *roundTrips, cycle func() error) {
		if err := cycle(); err != nil { // loads scripts, dials
			b.Fatal(err)
		}
		before, tripsBefore := serverCommands(b, ctx, admin), trips.n.Load()
		b.ResetTimer()
		for range b.N {
			if err := cycle(); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		// The INFO that reads the count is one more command.
		b.ReportMetric(float64(serverCommands(b, ctx, admin)-before-1)/float64(b.N), "cmds/op")
		b.ReportMetric(float64(trips.n.Load()-tripsBefore)/float64(b.N), "round-trips/op")
	}
	hooked := func(b *testing.B) (*goredis.Client, *roundTrips) {
		c, t := benchClient(b, addr), &roundTrips{}
		c.AddHook(t)
		return c, t
	}
	for _, fair := range []bool{false, true} {
		name := "padlock"
		if fair {
			name += "-fair"
		}
		b.Run(name, func(b *testing.B) {
			c, trips := hooked(b)
			l, err := redis.New(ctx, c, redis.Options{Fair: fair})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			count(b, trips, benchutil.Cycle(ctx, l, "bench/cmds"))
		})
	}
	b.Run("redsync", func(b *testing.B) {
		c, trips := hooked(b)
		rs := redsync.New(redsyncgoredis.NewPool(c))
		count(b, trips, func() error {
			m := rs.NewMutex("bench-native/cmds-redsync")
			if err := m.LockContext(ctx); err != nil {
				return err
			}
			_, err := m.UnlockContext(ctx)
			return err
		})
	})
	b.Run("bsm-redislock", func(b *testing.B) {
		c, trips := hooked(b)
		bsm := redislock.New(c)
		count(b, trips, func() error {
			lk, err := bsm.Obtain(ctx, "bench-native/cmds-bsm", 10*time.Second, nil)
			if err != nil {
				return err
			}
			return lk.Release(ctx)
		})
	})
}

// roundTrips is a go-redis hook counting what a client sends: each command
// or pipeline is one round trip it waits for.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (r *roundTrips) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmd)
	}
}

func (r *roundTrips) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmds)
	}
}

// serverCommands is how often the server ran cmds (every command when
// none is named), from INFO commandstats.
func serverCommands(b *testing.B, ctx context.Context, admin *goredis.Client, cmds ...string) int {
	n, err := padlocktest.RedisCommandCalls(ctx, admin, cmds...)
	if err != nil {
		b.Fatal(err)
	}
	return n
}

func benchClient(b *testing.B, addr string) *goredis.Client {
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	b.Cleanup(func() { c.Close() })
	return c
}

// BenchmarkRefusedOpen times Open against refused ports, the number
// docs/redis.md quotes (go-redis's own retries made it 1.7s on redis://).
func BenchmarkRefusedOpen(b *testing.B) {
	for _, u := range []string{
		"redis://" + "127.0.0.1:1" + "/",
		"redis+cluster://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3/",
		"redis+sentinel://127.0.0.1:1,127.0.0.1:2/mymaster",
		"redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3/",
	} {
		b.Run(strings.SplitN(u, ":", 2)[0], func(b *testing.B) {
			for b.Loop() {
				if l, err := padlock.Open(context.Background(), u); err == nil {
					l.Close()
					b.Fatalf("Open(%s) succeeded", u)
				}
			}
		})
	}
}

// redisAddr is the address of the package's one redis-server.
func redisAddr(b *testing.B) string {
	return benchutil.Server(b, "redis", padlocktest.Redis).Nodes()[0].Addr
}
