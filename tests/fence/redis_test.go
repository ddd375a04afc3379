package fence_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock/fence"
)

// redisRegister keeps resource's value in the key resource+":v", written
// by fence.Redis with RedisSet.
func redisRegister(c redis.UniversalClient) register {
	return register{
		write: func(ctx context.Context, resource string, token uint64, value int64) error {
			return fence.Redis(ctx, c, resource, token, fence.RedisSet(resource+":v", value))
		},
		read: func(ctx context.Context, resource string) (int64, error) {
			v, err := c.Get(ctx, resource+":v").Int64()
			if errors.Is(err, redis.Nil) {
				return 0, nil
			}
			return v, err
		},
	}
}

func TestRedis(t *testing.T) {
	need(t, rdb)
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: rdb.Nodes()[0].Addr})
	defer c.Close()
	if err := c.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	r := redisRegister(c)
	t.Run("basics", func(t *testing.T) { checkBasics(t, r, "orders/1") })
	t.Run("concurrent", func(t *testing.T) { checkConcurrent(t, r, "orders/2") })
	t.Run("every write", func(t *testing.T) {
		c.Set(ctx, "orders/3:gone", "x", 0)
		err := fence.Redis(ctx, c, "orders/3", 2,
			fence.RedisSet("orders/3:s", "v"),
			fence.RedisHSet("orders/3:h", "a", 1, "b", "two"),
			fence.RedisIncrBy("orders/3:n", 5),
			fence.RedisIncrBy("orders/3:n", 2),
			fence.RedisDel("orders/3:gone"))
		if err != nil {
			t.Fatal(err)
		}
		s, _ := c.Get(ctx, "orders/3:s").Result()
		h, _ := c.HGetAll(ctx, "orders/3:h").Result()
		n, _ := c.Get(ctx, "orders/3:n").Int64()
		gone, _ := c.Exists(ctx, "orders/3:gone").Result()
		if s != "v" || h["a"] != "1" || h["b"] != "two" || n != 7 || gone != 0 {
			t.Errorf("after the writes: s=%q h=%v n=%d gone exists=%d", s, h, n, gone)
		}
		// A stale token writes nothing at all.
		err = fence.Redis(ctx, c, "orders/3", 1, fence.RedisIncrBy("orders/3:n", 100), fence.RedisDel("orders/3:s"))
		n, _ = c.Get(ctx, "orders/3:n").Int64()
		if !errors.Is(err, fence.ErrStale) || n != 7 || c.Exists(ctx, "orders/3:s").Val() != 1 {
			t.Errorf("stale writes: %v, n=%d, s exists=%d", err, n, c.Exists(ctx, "orders/3:s").Val())
		}
	})
	t.Run("large tokens", func(t *testing.T) {
		// Above 2^53, where Lua's doubles could not tell these apart.
		big := uint64(1)<<60 + 1
		if err := fence.Redis(ctx, c, "orders/4", big); err != nil {
			t.Fatal(err)
		}
		if err := fence.Redis(ctx, c, "orders/4", big-1); !errors.Is(err, fence.ErrStale) {
			t.Errorf("token %d after %d: %v, want ErrStale", big-1, big, err)
		}
		if err := fence.Redis(ctx, c, "orders/4", 9); !errors.Is(err, fence.ErrStale) {
			t.Errorf("token 9 after %d: %v, want ErrStale (a shorter decimal)", big, err)
		}
		if got := c.Get(ctx, fence.RedisKeyPrefix+"orders/4").Val(); got != strconv.FormatUint(big, 10) {
			t.Errorf("token key holds %q", got)
		}
	})
	// Only the token keys and the test's own keys are left.
	keys, err := c.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	want := []string{"orders/1:v", "orders/2:v", "orders/3:h", "orders/3:n", "orders/3:s",
		fence.RedisKeyPrefix + "orders/1", fence.RedisKeyPrefix + "orders/2", fence.RedisKeyPrefix + "orders/3", fence.RedisKeyPrefix + "orders/4"}
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Errorf("keys left: %q, want %q", keys, want)
	}
}

func TestRedisCluster(t *testing.T) {
	need(t, cluster)
	ctx := context.Background()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(cluster.Addrs(), ",")})
	defer c.Close()
	r := redisRegister(c)
	t.Run("basics", func(t *testing.T) { checkBasics(t, r, "{orders/1}") })
	t.Run("concurrent", func(t *testing.T) { checkConcurrent(t, r, "{orders/2}") })
	t.Run("cross slot", func(t *testing.T) {
		err := fence.Redis(ctx, c, "{orders/3}", 1, fence.RedisSet("{orders/3}:a", 1), fence.RedisSet("orders/3:b", 1))
		if !errors.Is(err, fence.ErrCrossSlot) || !errors.Is(err, fence.ErrInvalid) {
			t.Fatalf("a write to another slot: %v, want ErrCrossSlot", err)
		}
		err = fence.Redis(ctx, c, "orders/3", 1, fence.RedisSet("{orders/3}:a", 1))
		if !errors.Is(err, fence.ErrCrossSlot) {
			t.Fatalf("a resource without the keys' hash tag: %v, want ErrCrossSlot", err)
		}
		if n := c.Exists(ctx, "{orders/3}:a", fence.RedisKeyPrefix+"{orders/3}", fence.RedisKeyPrefix+"orders/3").Val(); n != 0 {
			t.Errorf("a refused cross-slot write left %d keys", n)
		}
	})
	t.Run("slots agree with the server", func(t *testing.T) {
		// fence computes slots itself; the cluster's CLUSTER KEYSLOT is the
		// reference. Keys in one slot per the client must be so per the server.
		tokenSlot := c.ClusterKeySlot(ctx, fence.RedisKeyPrefix+"{orders/1}").Val()
		for i, k := range []string{"{orders/1}:v", "{orders/1}", "orders/1", "plain", "a{orders/1}c", "{}x", "x{}{y}", "{orders/1"} {
			slot := c.ClusterKeySlot(ctx, k).Val()
			err := fence.Redis(ctx, c, "{orders/1}", 100+uint64(i), fence.RedisSet(k, 1))
			if (err == nil) != (slot == tokenSlot) || (err != nil && !errors.Is(err, fence.ErrCrossSlot)) {
				t.Errorf("key %q (server slot %d, the token key's %d): %v", k, slot, tokenSlot, err)
			}
		}
	})
}
