package fence_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/padlock-go/padlock/fence"
)

type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

func TestZooKeeper(t *testing.T) {
	need(t, zoo)
	ctx := context.Background()
	conn, _, err := zk.Connect(strings.Split(zoo.Addrs(), ","), 10*time.Second, zk.WithLogger(quietLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	acl := zk.WorldACL(zk.PermAll)
	valueNode := func(resource string) string { return "/v-" + strings.ReplaceAll(resource, "/", "-") }
	r := register{
		write: func(ctx context.Context, resource string, token uint64, value int64) error {
			_, err := fence.ZooKeeper(ctx, conn, resource, token,
				&zk.SetDataRequest{Path: valueNode(resource), Data: []byte(strconv.FormatInt(value, 10)), Version: -1})
			return err
		},
		read: func(ctx context.Context, resource string) (int64, error) {
			data, _, err := conn.Get(valueNode(resource))
			if err != nil || len(data) == 0 {
				return 0, err
			}
			return strconv.ParseInt(string(data), 10, 64)
		},
	}
	for _, res := range []string{"orders/1", "orders/2"} {
		if _, err := conn.Create(valueNode(res), nil, 0, acl); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("basics", func(t *testing.T) { checkBasics(t, r, "orders/1") })
	t.Run("concurrent", func(t *testing.T) { checkConcurrent(t, r, "orders/2") })
	t.Run("a failing op applies nothing", func(t *testing.T) {
		_, err := fence.ZooKeeper(ctx, conn, "orders/1", 9,
			&zk.SetDataRequest{Path: valueNode("orders/1"), Data: []byte("90"), Version: -1},
			&zk.DeleteRequest{Path: "/no-such-node", Version: -1})
		if !errors.Is(err, zk.ErrNoNode) || !strings.Contains(err.Error(), "op 1") {
			t.Fatalf("ZooKeeper with a failing op = %v, want op 1's ErrNoNode", err)
		}
		// The token was not recorded, nor the other op applied.
		if v, _ := r.read(ctx, "orders/1"); v != 7 {
			t.Errorf("value %d, want 7", v)
		}
		if err := r.write(ctx, "orders/1", 8, 8); err != nil {
			t.Errorf("token 8 after the failed multi with 9: %v", err)
		}
	})
	t.Run("invalid ops", func(t *testing.T) {
		for _, op := range []any{"set", &zk.SetDataRequest{Path: fence.ZooKeeperNode("orders/1")}} {
			if _, err := fence.ZooKeeper(ctx, conn, "orders/1", 9, op); !errors.Is(err, fence.ErrInvalid) {
				t.Errorf("op %v: %v, want ErrInvalid", op, err)
			}
		}
	})
	t.Run("odd names", func(t *testing.T) {
		for i, res := range []string{".", "..", "a b/c%d", "zürich"} {
			if _, err := fence.ZooKeeper(ctx, conn, res, uint64(i+1)); err != nil {
				t.Errorf("resource %q: %v", res, err)
			}
		}
	})
	kids, _, err := conn.Children(fence.ZooKeeperDir)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(kids)
	want := []string{"%2E", "%2E%2E", "a%20b%2Fc%25d", "orders%2F1", "orders%2F2", "z%C3%BCrich"}
	if !slices.Equal(kids, want) {
		t.Errorf("token nodes: %q, want %q", kids, want)
	}
	top, _, err := conn.Children("/")
	slices.Sort(top)
	if err != nil || !slices.Equal(top, []string{"padlock-fence", "v-orders-1", "v-orders-2", "zookeeper"}) {
		t.Errorf("nodes at the root: %q, %v", top, err)
	}
}
