package fence_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/padlock-go/padlock/fence"
)

func TestEtcd(t *testing.T) {
	need(t, etcd)
	ctx := context.Background()
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(etcd.Addrs(), ","), DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Delete(ctx, "", clientv3.WithFromKey()); err != nil {
		t.Fatal(err)
	}
	r := register{
		write: func(ctx context.Context, resource string, token uint64, value int64) error {
			_, err := fence.Etcd(ctx, cli, resource, token, clientv3.OpPut("/v/"+resource, strconv.FormatInt(value, 10)))
			return err
		},
		read: func(ctx context.Context, resource string) (int64, error) {
			resp, err := cli.Get(ctx, "/v/"+resource)
			if err != nil || len(resp.Kvs) == 0 {
				return 0, err
			}
			return strconv.ParseInt(string(resp.Kvs[0].Value), 10, 64)
		},
	}
	t.Run("basics", func(t *testing.T) { checkBasics(t, r, "orders/1") })
	t.Run("concurrent", func(t *testing.T) { checkConcurrent(t, r, "orders/2") })
	t.Run("responses", func(t *testing.T) {
		res, err := fence.Etcd(ctx, cli, "orders/1", 8, clientv3.OpGet("/v/orders/1"), clientv3.OpPut("/v/orders/1", "70"))
		if err != nil || len(res) != 2 || string(res[0].GetResponseRange().Kvs[0].Value) != "7" {
			t.Fatalf("Etcd = %v, %v; want the ops' two responses, the first reading 7", res, err)
		}
	})
	t.Run("byte order is numeric order", func(t *testing.T) {
		for _, tok := range []uint64{9, 10, 99, 100, fence.MaxToken} {
			if _, err := fence.Etcd(ctx, cli, "orders/3", tok); err != nil {
				t.Fatalf("token %d: %v", tok, err)
			}
			if _, err := fence.Etcd(ctx, cli, "orders/3", tok-1); !errors.Is(err, fence.ErrStale) {
				t.Errorf("token %d after %d: %v, want ErrStale", tok-1, tok, err)
			}
		}
	})
	t.Run("op on the token key", func(t *testing.T) {
		if _, err := fence.Etcd(ctx, cli, "orders/1", 9, clientv3.OpPut(fence.EtcdKeyPrefix+"orders/1", "x")); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("an op on the token key: %v, want ErrInvalid", err)
		}
	})
	resp, err := cli.Get(ctx, "", clientv3.WithFromKey(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range resp.Kvs {
		keys = append(keys, string(kv.Key))
	}
	want := []string{"/v/orders/1", "/v/orders/2", fence.EtcdKeyPrefix + "orders/1", fence.EtcdKeyPrefix + "orders/2", fence.EtcdKeyPrefix + "orders/3"}
	if !slices.Equal(keys, want) {
		t.Errorf("keys left: %q, want %q", keys, want)
	}
}
