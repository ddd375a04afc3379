package bench

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/padlock-go/padlock"
	_ "github.com/padlock-go/padlock/all" // the URL schemes padlock.Open takes
	"github.com/padlock-go/padlock/driverkit"
	"github.com/padlock-go/padlock/mysqlpg"
	"github.com/padlock-go/padlock/redis"
)

// Open opens the group that benchmarks the servers rawURL names, a padlock
// URL: etcd://, redis://, redis+cluster://, redis+sentinel://, redlock://,
// zk://, postgres:// or mysql://, or mem://STORE (padlock's in-process
// backend: padlock alone, without a server). The benchmark's own clients take the URL's hosts,
// credentials and path; TLS URLs are not supported yet.
func Open(ctx context.Context, rawURL string) (*Group, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which may hold a password
		}
		return nil, fmt.Errorf("%w: %v", padlock.ErrInvalidURL, err)
	}
	// The benchmark's own clients read the query with u.Query(), which
	// drops a part that does not parse: refuse it, as padlock.Open does.
	if _, err := driverkit.Query(u); err != nil {
		return nil, err
	}
	switch strings.ToLower(u.Scheme) {
	case "etcd":
		return etcdGroup(ctx, u)
	case "mem":
		return memGroup(u)
	case redis.Scheme, redis.SchemeCluster, redis.SchemeSentinel:
		return redisGroup(ctx, u)
	case redis.SchemeRedLock:
		return redlockGroup(ctx, u)
	case "zk":
		return zookeeperGroup(ctx, u)
	case mysqlpg.SchemePostgres, mysqlpg.SchemePostgreSQL, mysqlpg.SchemeMySQL:
		if u.Scheme == mysqlpg.SchemePostgreSQL {
			u.Scheme = mysqlpg.SchemePostgres
		}
		return sqlGroup(ctx, u)
	case "etcds", redis.SchemeTLS, "zks":
		return nil, fmt.Errorf("%w: %s: the benchmark does not speak TLS yet", padlock.ErrUnknownScheme, u.Scheme)
	}
	return nil, fmt.Errorf("%w: %q (the benchmark knows mem, etcd, redis, redis+cluster, redis+sentinel, redlock, zk, postgres and mysql)", padlock.ErrUnknownScheme, u.Scheme)
}
