package mysqlpg_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/mysqlpg"
	"github.com/padlock-go/padlock/tests/benchutil"
)

// Compare the SQL backend's four configurations in one run, on one
// PostgreSQL and one MariaDB:
//
//	go test -run '^$' -bench . ./tests/mysqlpg
//
// Uncontended measures one Lock+Unlock; Handoff has two clients contend
// for one name, holding it 1ms each, and reports the hand-off latency
// (PostgreSQL wakes waiters with NOTIFY; MySQL's poll with backoff).
func BenchmarkUncontended(b *testing.B) {
	ctx := context.Background()
	benchEach(b, func(b *testing.B, u string) {
		l := benchutil.Open(b, u)
		for b.Loop() {
			lk, err := l.Lock(ctx, "u")
			if err != nil {
				b.Fatal(err)
			}
			lk.Unlock(ctx)
		}
	})
}

func BenchmarkHandoff(b *testing.B) {
	ctx := context.Background()
	benchEach(b, func(b *testing.B, u string) {
		ls := []*padlock.Locker{benchutil.Open(b, u), benchutil.Open(b, u)}
		benchutil.Contend(b, 2, time.Millisecond, func(i int) (func() error, error) {
			lk, err := ls[i].Lock(ctx, "h")
			if err != nil {
				return nil, err
			}
			return func() error { return lk.Unlock(ctx) }, nil
		})
	})
}

// benchEach runs f for both modes on both databases, each with a URL of
// its own table.
func benchEach(b *testing.B, f func(b *testing.B, u string)) {
	if startErr != nil {
		b.Skipf("database servers not available: %v", startErr)
	}
	for _, srv := range []server{{kind: "postgres", url: pg.URL(), addr: pg.Addrs()}, {kind: "mysql", url: maria.URL(), addr: maria.Addrs()}} {
		for _, mode := range []string{mysqlpg.ModeLease, mysqlpg.ModeAdvisory} {
			b.Run(srv.kind+"/"+mode, func(b *testing.B) {
				h := &harness{t: b, srv: srv, mode: mode, table: "bench_" + mode}
				f(b, h.url(srv.addr, url.Values{}))
			})
		}
	}
}
