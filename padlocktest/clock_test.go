package padlocktest_test

import (
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock/padlocktest"
)

// A FakeClock node's wall clock jumps and runs fast on SetClock, Redis's
// key expiry follows it, and a restart brings back the true time; nodes
// without FakeClock refuse SetClock.
func TestFakeClock(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	srv := padlocktest.Start(t, padlocktest.Redis, padlocktest.FakeClock())
	node := srv.Nodes()[0]
	rdb := goredis.NewClient(&goredis.Options{Addr: node.Addr})
	t.Cleanup(func() { rdb.Close() })
	// skew is the server's clock minus this process's.
	skew := func() time.Duration {
		t.Helper()
		st, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return time.Until(st)
	}
	near := func(what string, got, want time.Duration) {
		t.Helper()
		if d := got - want; d < -2*time.Second || d > 2*time.Second {
			t.Errorf("%s: the server's clock is %v off, want %v", what, got, want)
		}
	}
	near("at the start", skew(), 0)

	if err := rdb.Set(ctx, "k", "v", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := node.SetClock(2*time.Minute, 1); err != nil {
		t.Fatal(err)
	}
	near("after a jump of 2m", skew(), 2*time.Minute)
	if err := rdb.Get(ctx, "k").Err(); !errors.Is(err, goredis.Nil) {
		t.Errorf("a key with a 1m TTL outlived a 2m jump: %v", err)
	}

	// Ten times as fast: over a second of this process's time, the
	// server's clock moves several seconds (3x at least, on a loaded
	// machine), from where the jump left it.
	if err := node.SetClock(2*time.Minute, 10); err != nil {
		t.Fatal(err)
	}
	s0, t0 := skew(), time.Now()
	near("when the fast clock starts", s0, 2*time.Minute)
	if err := rdb.Set(ctx, "fast", "v", 30*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	padlocktest.WaitFor(t, "a key with a 30s TTL expiring on a clock ten times too fast", time.Minute, func() bool {
		return errors.Is(rdb.Get(ctx, "fast").Err(), goredis.Nil)
	})
	if real, gained := time.Since(t0), skew()-s0; gained < 2*real {
		t.Errorf("in %v the fast clock gained only %v", real, gained)
	}

	if err := node.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	near("after a restart", skew(), 0)

	plain := padlocktest.Start(t, padlocktest.Redis)
	if err := plain.Nodes()[0].SetClock(time.Second, 1); !errors.Is(err, padlocktest.ErrUnsupported) {
		t.Errorf("SetClock without FakeClock: %v, want ErrUnsupported", err)
	}
}
