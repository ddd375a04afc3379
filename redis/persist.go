package redis

import (
	"context"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock/backends"
)

// holdsSurviveRestart reads from the server, or every master of a
// cluster, whether an acknowledged hold survives a crash and restart:
// only if the server appends every write to its log and syncs it to disk
// before it answers (appendonly yes, appendfsync always). With appendfsync
// everysec or no, a crash loses up to a second or more of grants; RDB
// snapshots (save) come every so often, and a crash loses the grants
// since the last one; without either, a restart forgets everything. Where
// the user may not run CONFIG GET (the ACL, a managed service that
// disables it), or the server does not say, it is Unknown: padlock does
// not guess.
func holdsSurviveRestart(ctx context.Context, c goredis.UniversalClient) backends.Tristate {
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	cc, ok := c.(*goredis.ClusterClient)
	if !ok {
		return persists(ctx, c)
	}
	var (
		mu      sync.Mutex
		answers []backends.Tristate
	)
	if err := cc.ForEachMaster(ctx, func(ctx context.Context, m *goredis.Client) error {
		a := persists(ctx, m)
		mu.Lock()
		answers = append(answers, a)
		mu.Unlock()
		return nil
	}); err != nil || len(answers) == 0 {
		return backends.Unknown
	}
	return everyone(answers)
}

// persists asks one server (or the primary a client follows).
func persists(ctx context.Context, c goredis.Cmdable) backends.Tristate {
	// One pattern: Redis before 7 takes one parameter per CONFIG GET.
	cfg, err := c.ConfigGet(ctx, "append*").Result()
	if err != nil {
		return backends.Unknown // NOPERM, or CONFIG renamed away
	}
	aof, fsync := cfg["appendonly"], cfg["appendfsync"]
	switch {
	case aof == "" || fsync == "":
		return backends.Unknown
	case aof == "yes" && fsync == "always":
		return backends.Yes
	}
	return backends.No
}

// everyone is Yes if every answer is, No if any is, else Unknown: a lock
// lives on one master, and (RedLock) a restart of any master that forgot
// its share can give a bare majority to another client.
func everyone(answers []backends.Tristate) backends.Tristate {
	all := backends.Yes
	for _, a := range answers {
		switch a {
		case backends.No:
			return backends.No
		case backends.Unknown:
			all = backends.Unknown
		}
	}
	return all
}
