//go:build u1before

package bench

import (
	"context"
	"net"

	before "github.com/padlock-go/padlockbefore"
	_ "github.com/padlock-go/padlockbefore/all" // its URL schemes
	beforeetcd "github.com/padlock-go/padlockbefore/etcd"
	beforeredis "github.com/padlock-go/padlockbefore/redis"
	goredis "github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The earlier padlock, which scripts/bench-u1 links in under the module
// path github.com/padlock-go/padlockbefore (see before.go).
func init() {
	beforeEtcd = func(ctx context.Context, cli *clientv3.Client, prefix string) (Client, error) {
		l, err := beforeetcd.New(ctx, cli, prefix)
		if err != nil {
			return nil, err
		}
		return &beforeClient{l: l, closeConn: cli.Close}, nil
	}
	beforeRedis = func(ctx context.Context, cli goredis.UniversalClient, prefix string, fair bool) (Client, error) {
		l, err := beforeredis.New(ctx, cli, beforeredis.Options{Prefix: prefix, Fair: fair})
		if err != nil {
			return nil, err
		}
		return &beforeClient{l: l, closeConn: cli.Close}, nil
	}
	beforeOpen = func(ctx context.Context, url string, dial func(ctx context.Context, network, addr string) (net.Conn, error), prefix string) (Client, error) {
		l, err := before.Open(ctx, url, before.WithDialer(dial))
		if err != nil {
			return nil, err
		}
		return &beforeClient{l: l, prefix: prefix}, nil
	}
}

// beforeClient is lockerClient's mutex over the earlier padlock.
type beforeClient struct {
	l         *before.Locker
	prefix    string
	closeConn func() error
}

func (c *beforeClient) Lock(ctx context.Context, name string) (Held, error) {
	lk, err := c.l.Lock(ctx, c.prefix+name)
	if err != nil {
		return Held{}, err
	}
	return Held{Token: lk.Token(), Release: lk.Unlock}, nil
}

func (c *beforeClient) Close() error {
	err := c.l.Close()
	if c.closeConn != nil {
		if cerr := c.closeConn(); err == nil {
			err = cerr
		}
	}
	return err
}
