package redis_test

import (
	"context"
	"os"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// acquire.lua answers a retried run of the same acquisition (its first run
// took the lock, and its answer was lost) as granted, with the same token
// and a fresh lease; another acquisition is refused as before.
func TestAcquireScriptRetried(t *testing.T) {
	needServers(t)
	src, err := os.ReadFile("../../redis/scripts/acquire.lua")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rdb := goredis.NewClient(&goredis.Options{Addr: single.Nodes()[0].Addr})
	defer rdb.Close()
	script := goredis.NewScript(string(src))
	keys := []string{"retry:{n}:lock", "retry:{n}:fence", "retry:{n}:queue", "retry:{n}:deadlines", "retry:{n}:holds", "retry:{n}:tokens"}
	defer rdb.Del(ctx, keys...)
	run := func(id string, ms int) []int64 {
		t.Helper()
		v, err := script.Run(ctx, rdb, keys, id, ms).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	first := run("id-1", 500)
	if first[0] != 1 {
		t.Fatalf("first run: %v, want granted", first)
	}
	again := run("id-1", 60000)
	if again[0] != 1 || again[1] != first[1] {
		t.Fatalf("retried run: %v, want granted with token %d", again, first[1])
	}
	if pttl := rdb.PTTL(ctx, keys[0]).Val(); pttl < 30*time.Second {
		t.Errorf("retried run left the lease at %v, want it counted again (a minute)", pttl)
	}
	if other := run("id-2", 500); other[0] != 0 || other[1] <= 0 {
		t.Errorf("another acquisition: %v, want refused with the holder's pttl", other)
	}
}
