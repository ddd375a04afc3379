package fence

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// RedisKeyPrefix starts the key of a resource's token on Redis: the key
// RedisKeyPrefix+resource holds the highest token seen for the resource,
// in decimal, with no expiry. It is the only key Redis adds.
const RedisKeyPrefix = "padlock:fence:"

//go:embed scripts/fence.lua
var fenceLua string

var fenceScript = redis.NewScript(fenceLua)

// RedisWrite is one write that Redis applies after the token check: make
// one with RedisSet, RedisHSet, RedisDel or RedisIncrBy.
type RedisWrite struct {
	cmd  string
	key  string
	args []any
}

// RedisSet is SET key value.
func RedisSet(key string, value any) RedisWrite { return RedisWrite{"SET", key, []any{value}} }

// RedisHSet is HSET key field value [field value ...].
func RedisHSet(key string, fieldValues ...any) RedisWrite {
	return RedisWrite{"HSET", key, fieldValues}
}

// RedisDel is DEL key.
func RedisDel(key string) RedisWrite { return RedisWrite{"DEL", key, nil} }

// RedisIncrBy is INCRBY key n.
func RedisIncrBy(key string, n int64) RedisWrite { return RedisWrite{"INCRBY", key, []any{n}} }

// Redis checks token against the highest recorded for resource (in the key
// RedisKeyPrefix+resource), records it, and applies writes, in one
// script run by EVALSHA: atomically, with nothing between the check and
// the writes. A token below the highest returns a *StaleError (errors.Is
// ErrStale) and writes nothing; an equal or higher one is recorded and the
// writes applied in order. With no writes, Redis only checks and records.
//
// On a Redis Cluster (c a *redis.ClusterClient) the token key and every
// written key must hash to one slot: put the same hash tag in the resource
// and the keys ("{orders/42}" and "{orders/42}:total"); otherwise Redis
// returns ErrCrossSlot (with ErrInvalid) and writes nothing.
//
// A write that Redis itself refuses (WRONGTYPE: an HSET on a string) stops
// the script there with the token recorded and the writes before it
// applied: Redis does not roll a script back. A Redis that loses its data
// (a restart without persistence, a failover to a replica behind) forgets
// the token too; see docs/fencing.md.
//
// A write may have at most 7,000 arguments (an HSET's fields and values
// together), and a *redis.Ring is refused: ErrInvalid.
func Redis(ctx context.Context, c redis.Scripter, resource string, token uint64, writes ...RedisWrite) error {
	if err := check(resource, token); err != nil {
		return err
	}
	if c == nil {
		return invalid("Redis needs a client")
	}
	tokenKey := RedisKeyPrefix + resource
	keys := []string{tokenKey}
	args := []any{strconv.FormatUint(token, 10)}
	for i, w := range writes {
		switch {
		case w.cmd == "":
			return invalid("write %d is the zero RedisWrite: make writes with RedisSet, RedisHSet, RedisDel or RedisIncrBy", i)
		case w.key == "":
			return invalid("write %d (%s) has an empty key", i, w.cmd)
		case w.key == tokenKey:
			return invalid("write %d (%s) is to the token key %q itself", i, w.cmd, tokenKey)
		case w.cmd == "HSET" && (len(w.args) == 0 || len(w.args)%2 != 0):
			return invalid("write %d (HSET %s) has %d arguments, want field-value pairs", i, w.key, len(w.args))
		case len(w.args) > maxWriteArgs:
			// The script passes a write's arguments to its command with
			// Lua's unpack, which fails past its stack's limit: after the
			// writes before it were applied.
			return invalid("write %d (%s %s) has %d arguments, more than the %d one write may have: split it", i, w.cmd, w.key, len(w.args), maxWriteArgs)
		}
		keys = append(keys, w.key)
		args = append(append(args, w.cmd, len(w.args)), w.args...)
	}
	switch c.(type) {
	case *redis.ClusterClient:
		if err := sameSlot(keys); err != nil {
			return err
		}
	case *redis.Ring:
		// A Ring runs the script on the first key's shard, the token
		// key's, and reads each written key later from its own shard.
		return invalid("Redis over a *redis.Ring: it shards keys by their names, and the script's writes would land on the token key's shard; use a Client or a ClusterClient")
	}
	res, err := fenceScript.Run(ctx, c, keys, args...).Slice()
	if err != nil {
		return fmt.Errorf("fence: redis: %w", err)
	}
	if len(res) != 2 {
		return fmt.Errorf("fence: redis: unexpected answer %v", res)
	}
	if ok, _ := res[0].(int64); ok == 1 {
		return nil
	}
	s, _ := res[1].(string)
	highest, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return fmt.Errorf("fence: redis: %s holds %q, not a token", tokenKey, s)
	}
	return stale(resource, token, highest)
}

// maxWriteArgs is the most arguments one write may have: Lua's unpack,
// which passes them to the command in the script, fails past 7,999.
const maxWriteArgs = 7000
