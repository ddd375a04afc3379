package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/go-zookeeper/zk"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/fence"
	_ "github.com/padlock-go/padlock/memory"
)

// A service that accepts writes guards them with Middleware; a client that
// holds a lock sends its token with Transport. A holder whose lock passed
// to another, and who writes after the newer holder did, gets 409.
func ExampleMiddleware() {
	ctx := context.Background()
	var balance int
	svc := httptest.NewServer(fence.Middleware(nil, nil)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		balance++ // the write the token protects
		fmt.Fprintln(w, "balance", balance)
	})))
	defer svc.Close()

	locker, _ := padlock.Open(ctx, "mem://example-fence-http")
	defer locker.Close()
	post := func(lk *padlock.Lock) string {
		client := &http.Client{Transport: fence.Transport(nil, lk)}
		resp, err := client.Post(svc.URL, "text/plain", nil)
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return fmt.Sprintf("%d %s", resp.StatusCode, body)
	}

	old, _ := locker.Lock(ctx, "accounts/7")
	fmt.Print(post(old))
	old.Unlock(ctx) // or lost it, paused, without knowing
	lk, _ := locker.Lock(ctx, "accounts/7")
	defer lk.Unlock(ctx)
	fmt.Print(post(lk))
	fmt.Print(post(old)) // the late write of the former holder
	// Output:
	// 200 balance 1
	// 200 balance 2
	// 409 fence: stale token: resource "accounts/7" refused token 1, below the highest seen, 2
}

// Memory is the Store the middleware uses by default.
func ExampleMemory() {
	ctx := context.Background()
	m := fence.NewMemory()
	fmt.Println(m.Record(ctx, "orders/42", 7))
	fmt.Println(m.Record(ctx, "orders/42", 7)) // the same holder again
	err := m.Record(ctx, "orders/42", 6)
	fmt.Println(errors.Is(err, fence.ErrStale), m.Highest("orders/42"))
	// Output:
	// <nil>
	// <nil>
	// true 7
}

// Table.Do runs the caller's statements in a transaction that first
// checks and records the token (the table made once by Migrate).
func ExampleTable_Do() {
	ctx := context.Background()
	var db *sql.DB       // sql.Open("pgx", ...) or sql.Open("mysql", ...)
	var lk *padlock.Lock // from locker.Lock(ctx, "orders/42")
	err := fence.PostgresTable.Do(ctx, db, "orders/42", lk.Token(), func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "UPDATE orders SET state = 'paid' WHERE id = 42")
		return err
	})
	if errors.Is(err, fence.ErrStale) {
		return // a newer holder has written: this one lost its lock
	}
}

// Redis checks the token and applies the writes in one script.
func ExampleRedis() {
	ctx := context.Background()
	var rdb *redis.Client // redis.NewClient(...), or a *redis.ClusterClient
	var lk *padlock.Lock
	err := fence.Redis(ctx, rdb, "{orders/42}", lk.Token(),
		fence.RedisHSet("{orders/42}:order", "state", "paid"),
		fence.RedisIncrBy("{orders/42}:payments", 1))
	if errors.Is(err, fence.ErrStale) {
		return
	}
}

// Etcd checks the token and runs the ops in one transaction.
func ExampleEtcd() {
	ctx := context.Background()
	var cli *clientv3.Client
	var lk *padlock.Lock
	_, err := fence.Etcd(ctx, cli, "orders/42", lk.Token(), clientv3.OpPut("/orders/42/state", "paid"))
	if errors.Is(err, fence.ErrStale) {
		return
	}
}

// ZooKeeper checks the token and applies the requests in one multi.
func ExampleZooKeeper() {
	ctx := context.Background()
	var conn *zk.Conn
	var lk *padlock.Lock
	_, err := fence.ZooKeeper(ctx, conn, "orders/42", lk.Token(),
		&zk.SetDataRequest{Path: "/orders/42", Data: []byte("paid"), Version: -1})
	if errors.Is(err, fence.ErrStale) {
		return
	}
}
