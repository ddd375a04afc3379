package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/padlock-go/padlock/padlocktest"
)

// The servers' CPU counts connections that start during the measurement:
// on PostgreSQL, whose every connection is a process of its own, one
// connection opened after the first reading works and ends (its process
// reaped by the server), and another opens, works and stays; the second
// reading, less the first, holds what both used. The benchmark used to
// read only the processes alive at the first reading, and reported 1µs of
// server CPU per cycle for padlock's advisory mode on PostgreSQL, whose
// session connects at the first Lock.
func TestServersCPUCountsNewConnections(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := padlocktest.Start(t, padlocktest.Postgres)
	pids := serverPIDs(strings.Split(srv.Addrs(), ","))
	if len(pids) == 0 {
		t.Fatalf("no server process found listening on %s", srv.Addrs())
	}
	before := serversCPU(pids)
	// work runs a query that keeps its server process busy for a while,
	// and returns the CPU time that process has used, read from /proc
	// while it lives.
	work := func(c *pgx.Conn) time.Duration {
		t.Helper()
		var pid int
		if err := c.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			t.Fatal(err)
		}
		var n int64
		if err := c.QueryRow(ctx, "SELECT count(*) FROM generate_series(1, 3000000)").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return processCPU([]int{pid})
	}
	ended, err := pgx.Connect(ctx, srv.AdminDSN())
	if err != nil {
		t.Fatal(err)
	}
	endedUsed := work(ended)
	if err := ended.Close(ctx); err != nil {
		t.Fatal(err)
	}
	kept, err := pgx.Connect(ctx, srv.AdminDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close(context.Background())
	used := endedUsed + work(kept)
	if endedUsed < 50*time.Millisecond {
		t.Fatalf("the ended connection's process used %v: too little to tell", endedUsed)
	}
	// The ended connection's time reaches its parent once the server has
	// reaped its process: wait for that.
	var got time.Duration
	padlocktest.WaitFor(t, "the servers' CPU to hold what the two connections' processes used ("+used.String()+")", 30*time.Second,
		func() bool { got = serversCPU(pids) - before; return got >= used })
	// Nor twice: counted both as its own and as its parent's, the ended
	// connection would add its time again. What else the server did
	// meanwhile (its background processes, idle) is far less than half.
	if got >= used+endedUsed/2 {
		t.Errorf("the servers' CPU rose by %v, more than the %v the two connections' processes used: counted twice?", got, used)
	}
}
