package redis_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/padlocktest"
	padredis "github.com/padlock-go/padlock/redis"
)

// A database number the server does not have (redis-server has 16 by
// default) is a mistake in the URL, with the server's words, not an
// outage: no retry mends it.
func TestOpenDatabaseOutOfRange(t *testing.T) {
	needServers(t)
	for _, u := range []string{"redis://" + single.Addrs() + "/99", "redis://" + single.Addrs() + "/?db=99"} {
		l, err := padlock.Open(context.Background(), u)
		if err == nil {
			l.Close()
			t.Errorf("Open(%s) succeeded", u)
			continue
		}
		if !errors.Is(err, padlock.ErrInvalidURL) || errors.Is(err, padlock.ErrUnavailable) || !strings.Contains(err.Error(), "DB index is out of range") {
			t.Errorf("Open(%s) = %v, want ErrInvalidURL with the server's words", u, err)
		}
	}
}

// Capabilities().HoldsSurviveRestart is read from the server at Open, and
// is true to what a restart does: with appendonly yes and appendfsync
// always a hold survives a crash and restart (another client still cannot
// take it, and its holder still can release it); without persistence the
// restarted server has forgotten it, and another client takes the lock at
// once. Where the user may not read the configuration, it is Unknown.
func TestHoldsSurviveRestart(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name string
		opts []padlocktest.Option
		want padlock.Tristate
	}{
		{"appendonly", []padlocktest.Option{padlocktest.RedisAppendOnly()}, padlock.Yes},
		{"no persistence", nil, padlock.No},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := padlocktest.Start(t, padlocktest.Redis, tc.opts...)
			url := srv.URL() + "/?prefix=restart"
			a, err := padlock.Open(ctx, url, padlock.WithTTL(30*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			b, err := padlock.Open(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if got := a.Capabilities().HoldsSurviveRestart; got != tc.want {
				t.Fatalf("HoldsSurviveRestart = %v, want %v", got, tc.want)
			}
			lk, err := a.Lock(ctx, "job")
			if err != nil {
				t.Fatal(err)
			}
			if err := srv.Restart(ctx); err != nil { // SIGKILL, then start again
				t.Fatal(err)
			}
			other, err := b.TryLock(ctx, "job")
			switch {
			case tc.want == padlock.Yes && !errors.Is(err, padlock.ErrNotAcquired):
				t.Errorf("TryLock after a restart of a server that persists: %v, want ErrNotAcquired: the hold survived", err)
			case tc.want == padlock.No && err != nil:
				t.Errorf("TryLock after a restart of a server without persistence: %v, want the lock: the server forgot the hold", err)
			}
			if other != nil {
				other.Unlock(ctx)
			}
			if tc.want == padlock.Yes {
				if err := lk.Unlock(ctx); err != nil {
					t.Errorf("Unlock of a hold that survived the restart: %v", err)
				}
			}
		})
	}

	// appendfsync everysec: a crash loses up to a second of grants.
	srv := padlocktest.Start(t, padlocktest.Redis, padlocktest.RedisAppendOnly())
	admin := goredis.NewClient(&goredis.Options{Addr: srv.Nodes()[0].Addr})
	defer admin.Close()
	if err := admin.ConfigSet(ctx, "appendfsync", "everysec").Err(); err != nil {
		t.Fatal(err)
	}
	// A user who may not read the configuration.
	if err := admin.Do(ctx, "ACL", "SETUSER", "noconfig", "on", ">pw", "~*", "&*", "+@all", "-config").Err(); err != nil {
		t.Fatal(err)
	}
	cli := goredis.NewClient(&goredis.Options{Addr: srv.Nodes()[0].Addr, ContextTimeoutEnabled: true})
	defer cli.Close()
	for _, c := range []struct {
		what string
		open func() (*padlock.Locker, error)
		want padlock.Tristate
	}{
		{"appendfsync everysec", func() (*padlock.Locker, error) { return padlock.Open(ctx, srv.URL()+"/?prefix=restart") }, padlock.No},
		{"redis.New, appendfsync everysec", func() (*padlock.Locker, error) { return padredis.New(ctx, cli, padredis.Options{}) }, padlock.No},
		{"a user without CONFIG", func() (*padlock.Locker, error) {
			return padlock.Open(ctx, "redis://noconfig:pw@"+srv.Nodes()[0].Addr+"/?prefix=restart")
		}, padlock.Unknown},
		{"Redis Cluster without persistence", func() (*padlock.Locker, error) { return padlock.Open(ctx, cluster.URL()+"/?prefix=restart") }, padlock.No},
		{"Sentinel without persistence", func() (*padlock.Locker, error) { return padlock.Open(ctx, sentinel.URL()+"?prefix=restart") }, padlock.No},
		{"RedLock without persistence", func() (*padlock.Locker, error) { return padlock.Open(ctx, masters3.URL()+"/?prefix=restart") }, padlock.No},
	} {
		l, err := c.open()
		if err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		if got := l.Capabilities().HoldsSurviveRestart; got != c.want {
			t.Errorf("%s: HoldsSurviveRestart = %v, want %v", c.what, got, c.want)
		}
		l.Close()
	}
	// RedLock: Yes only when every master persists.
	aof := padlocktest.Start(t, padlocktest.RedLock, padlocktest.Nodes(3), padlocktest.RedisAppendOnly())
	l, err := padlock.Open(ctx, aof.URL()+"/?prefix=restart")
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Capabilities().HoldsSurviveRestart; got != padlock.Yes {
		t.Errorf("RedLock over masters that persist: HoldsSurviveRestart = %v, want yes", got)
	}
	l.Close()
}
