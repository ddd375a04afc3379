package etcd_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/etcd"
)

// etcd.New builds a Locker over the application's own client, and closing
// the Locker revokes its lease (its keys go) but leaves the client working.
func TestNewOverExistingClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{server.Nodes()[0].Addr},
		DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	l, err := etcd.New(ctx, cli, "/existing-client", padlock.WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Lock(ctx, "n"); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, "/existing-client/n/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 1 {
		t.Fatalf("the hold is not under the given prefix: count %d, %v", resp.Count, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	resp, err = cli.Get(ctx, "/existing-client/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatalf("the application's client stopped working after Locker.Close: %v", err)
	}
	if resp.Count != 0 {
		t.Errorf("Close left %d keys", resp.Count)
	}
	if _, err := etcd.New(ctx, nil, ""); !errors.Is(err, padlock.ErrInvalidOption) {
		t.Errorf("New with a nil client = %v, want ErrInvalidOption", err)
	}
}
