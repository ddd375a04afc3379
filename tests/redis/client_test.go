package redis_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/internal/capture"
	"github.com/padlock-go/padlock/redis"
	"github.com/padlock-go/padlock/tests/testserver"
)

// A library writes nothing to its user's stderr: go-redis's pool errors
// about a server that is down go to padlock's logger (discarded unless
// WithLogger says otherwise).
func TestNothingOnStderr(t *testing.T) {
	ctx := context.Background()
	out := capture.Stderr(t, func() {
		for _, u := range []string{"redis://127.0.0.1:1/", "redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3/"} {
			if _, err := padlock.Open(ctx, u); !errors.Is(err, padlock.ErrUnavailable) {
				t.Errorf("Open(%q) = %v, want ErrUnavailable", u, err)
			}
		}
	})
	if strings.TrimSpace(out) != "" {
		t.Errorf("Open against servers that are down wrote to stderr:\n%s", out)
	}
}

// redis.New builds a Locker over the application's own client, and closing
// the Locker leaves that client working.
func TestNewOverExistingClient(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cli := goredis.NewClient(&goredis.Options{Addr: single.Nodes[0].Addr, ContextTimeoutEnabled: true})
	defer cli.Close()
	for _, fair := range []bool{false, true} {
		l, err := redis.New(ctx, cli, redis.Options{Prefix: "existing", Fair: fair}, padlock.WithTTL(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		lk, err := l.Lock(ctx, "n")
		if err != nil {
			t.Fatal(err)
		}
		if n, err := cli.Exists(ctx, "existing:{n}:lock").Result(); err != nil || n != 1 {
			t.Errorf("the hold is not under the given prefix: exists = %d, %v", n, err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if err := cli.Ping(ctx).Err(); err != nil {
			t.Fatalf("the application's client stopped working after Locker.Close: %v", err)
		}
	}
	if _, err := redis.New(ctx, cli, redis.Options{Prefix: "a{b"}); !errors.Is(err, padlock.ErrInvalidOption) {
		t.Errorf("New with a brace in the prefix = %v, want ErrInvalidOption", err)
	}
}

// subscribeCalls reads how many SUBSCRIBE commands the server has run.
func subscribeCalls(t *testing.T, ctx context.Context, admin *goredis.Client) int {
	t.Helper()
	info, err := admin.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_subscribe:calls="); ok {
			n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			return n
		}
	}
	return 0
}

// An uncontended Lock never subscribes (docs/redis.md): it tries first and
// subscribes only when the lock is taken.
func TestUncontendedLockDoesNotSubscribe(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := goredis.NewClient(&goredis.Options{Addr: single.Nodes[0].Addr})
	defer admin.Close()
	for _, fair := range []bool{false, true} {
		l, err := redis.New(ctx, admin, redis.Options{Prefix: "nosub", Fair: fair})
		if err != nil {
			t.Fatal(err)
		}
		before := subscribeCalls(t, ctx, admin)
		for range 20 {
			lk, err := l.Lock(ctx, "n")
			if err != nil {
				t.Fatal(err)
			}
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if n := subscribeCalls(t, ctx, admin) - before; n != 0 {
			t.Errorf("fair=%v: 20 uncontended Lock+Unlock sent %d SUBSCRIBEs, want none", fair, n)
		}
		// A contended Lock does subscribe: the count can move.
		lk, _ := l.Lock(ctx, "n")
		res := make(chan error, 1)
		go func() {
			lk2, err := l.Lock(ctx, "n")
			if err == nil {
				err = lk2.Unlock(ctx)
			}
			res <- err
		}()
		testserver.WaitFor(t, "a contended Lock subscribing (else the counter cannot see SUBSCRIBEs)", 30*time.Second,
			func() bool { return subscribeCalls(t, ctx, admin) != before })
		lk.Unlock(ctx)
		if err := <-res; err != nil {
			t.Fatal(err)
		}
		l.Close()
	}
}
