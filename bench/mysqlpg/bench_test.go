package mysqlpg_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/bench/benchutil"
	"github.com/padlock-go/padlock/mysqlpg"
	"github.com/padlock-go/padlock/padlocktest"
)

// Compare the SQL backend's four configurations in one run, on one
// PostgreSQL and one MariaDB:
//
//	go test -run '^$' -bench . ./bench/mysqlpg
//
// Uncontended measures one Lock+Unlock; Handoff has two clients contend
// for one name, holding it 1ms each, and reports the hand-off latency
// (writers wait in a queue on the server in lease mode on both databases
// and in MySQL's advisory mode; PostgreSQL's advisory waiters are woken
// by NOTIFY and try again).
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

// benchEach runs f for both modes on both databases (the package's
// PostgreSQL and MariaDB), each mode with a table of its own.
func benchEach(b *testing.B, f func(b *testing.B, u string)) {
	for _, db := range []struct {
		kind string
		srv  func() *padlocktest.Server
	}{
		{"postgres", func() *padlocktest.Server { return benchutil.Server(b, "postgres", padlocktest.Postgres) }},
		{"mysql", func() *padlocktest.Server { return benchutil.Server(b, "mysql", padlocktest.MySQL) }},
	} {
		for _, mode := range []string{mysqlpg.ModeLease, mysqlpg.ModeAdvisory} {
			b.Run(db.kind+"/"+mode, func(b *testing.B) {
				u, err := url.Parse(db.srv().URL())
				if err != nil {
					b.Fatal(err)
				}
				q := u.Query()
				q.Set("table", "bench_"+mode)
				q.Set("mode", mode)
				u.RawQuery = q.Encode()
				f(b, u.String())
			})
		}
	}
}
