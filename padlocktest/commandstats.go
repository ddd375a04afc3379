package padlocktest

import (
	"context"
	"slices"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// RedisCommandCalls reads a Redis server's INFO commandstats through c and
// sums how often it ran the named commands ("evalsha", "subscribe"),
// those inside scripts included, or every command when none is named: a
// count on the server, for tests and benchmarks that check what a cycle
// costs.
func RedisCommandCalls(ctx context.Context, c *goredis.Client, cmds ...string) (int, error) {
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	n := 0
	for line := range strings.Lines(info) {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
		if !ok || len(cmds) > 0 && !slices.Contains(cmds, name) {
			continue
		}
		c, _ := strconv.Atoi(strings.SplitN(rest, ",", 2)[0])
		n += c
	}
	return n, nil
}
