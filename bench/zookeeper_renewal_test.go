package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/padlocktest"
	_ "github.com/padlock-go/padlock/zookeeper"
)

// BenchmarkZooKeeperHolding measures what keeping ZooKeeper holds costs
// the servers of a three-server ensemble: each of 20 clients (a session
// each) holds one lock, or ten, and one operation is one session timeout
// of holding. It reports the client requests the ensemble received per
// client per session timeout (pings included), and the ensemble's CPU
// time per client per timeout.
//
//   - padlock: padlock's zk://, whose session proves every quarter
//     timeout that the leader recorded it (a sync, which the leader
//     answers; zookeeper/proof.go), and whose holds need no request of
//     their own (a watch on each node reports its deletion).
//   - before: the same holds renewed as padlock did before the prover,
//     every third of the timeout: one exists for a single hold, one multi
//     of version checks (a write, through the leader) for several. A
//     follower answers the exists by itself: a paused leader goes
//     unnoticed.
//
// Run it with
//
//	go test -run '^$' -bench ZooKeeperHolding -benchtime 10x ./bench
func BenchmarkZooKeeperHolding(b *testing.B) {
	const clients = 20
	srv := padlocktest.Start(b, padlocktest.ZooKeeper, padlocktest.Nodes(3))
	var addrs []string
	for _, n := range srv.Nodes() {
		addrs = append(addrs, n.Addr)
	}
	// The harness servers' test lease (40 ticks): shorter ones drop
	// connections on a loaded machine.
	ttl := padlocktest.ZooKeeperTTL
	ctx := context.Background()
	measure := func(b *testing.B, hold func(i int) (release func())) {
		var releases []func()
		for i := range clients {
			releases = append(releases, hold(i))
		}
		defer func() {
			for _, r := range releases {
				r()
			}
		}()
		time.Sleep(ttl) // every session past its first renewals: the steady state
		pids := serverPIDs(addrs)
		if len(pids) != len(addrs) {
			b.Fatalf("found %d of the %d servers' processes", len(pids), len(addrs))
		}
		cpu0, pk0 := processCPU(pids), packetsReceived(b, ctx, addrs)
		b.ResetTimer()
		for range b.N {
			time.Sleep(ttl) // one operation: one session timeout of holding
		}
		b.StopTimer()
		cpu, pk := processCPU(pids)-cpu0, packetsReceived(b, ctx, addrs)-pk0
		per := float64(b.N * clients)
		b.ReportMetric(float64(pk)/per, "requests/client/timeout")
		b.ReportMetric(float64(cpu.Microseconds())/per, "server-µs/client/timeout")
		b.ReportMetric(0, "ns/op") // the timeout itself: not a measure
	}
	for _, holds := range []int{1, 10} {
		b.Run(fmt.Sprintf("padlock/holds=%d", holds), func(b *testing.B) {
			measure(b, func(i int) func() {
				l, err := padlock.Open(ctx, "zk://"+strings.Join(addrs, ",")+"/bench-holding", padlock.WithTTL(ttl))
				if err != nil {
					b.Fatal(err)
				}
				var lks []*padlock.Lock
				for j := range holds {
					lk, err := l.Lock(ctx, fmt.Sprintf("h%d-%d", i, j))
					if err != nil {
						b.Fatal(err)
					}
					lks = append(lks, lk)
				}
				return func() {
					for _, lk := range lks {
						if lk.Err() != nil {
							b.Errorf("a hold of client %d lost while held: %v", i, lk.Err())
						}
						lk.Unlock(ctx)
					}
					l.Close()
				}
			})
		})
		b.Run(fmt.Sprintf("before/holds=%d", holds), func(b *testing.B) {
			measure(b, func(i int) func() {
				conn := holdingConn(b, addrs, ttl)
				var checks []any
				for j := range holds {
					path := fmt.Sprintf("/bench-holding-before-%d-%d", i, j)
					if _, err := conn.Create(path, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
						b.Fatal(err)
					}
					checks = append(checks, &zk.CheckVersionRequest{Path: path, Version: -1})
				}
				renew := func() error {
					if holds == 1 {
						ok, _, err := conn.Exists(checks[0].(*zk.CheckVersionRequest).Path)
						if err == nil && !ok {
							err = zk.ErrNoNode
						}
						return err
					}
					_, err := conn.Multi(checks...)
					return err
				}
				stop, done := make(chan struct{}), make(chan struct{})
				go func() {
					defer close(done)
					t := time.NewTicker(ttl / 3)
					defer t.Stop()
					for {
						select {
						case <-stop:
							return
						case <-t.C:
							if err := renew(); err != nil {
								b.Errorf("renewing client %d's holds: %v", i, err)
							}
						}
					}
				}()
				var once sync.Once
				return func() {
					once.Do(func() {
						close(stop)
						<-done
						conn.Close()
					})
				}
			})
		})
	}
}

// holdingConn is a go-zookeeper session with the given timeout.
func holdingConn(b *testing.B, addrs []string, ttl time.Duration) *zk.Conn {
	b.Helper()
	conn, events, err := zk.Connect(addrs, ttl, zk.WithLogger(quietZK{}))
	if err != nil {
		b.Fatal(err)
	}
	deadline := time.After(30 * time.Second)
	for ev := range events {
		if ev.State == zk.StateHasSession {
			break
		}
		select {
		case <-deadline:
			b.Fatal("no ZooKeeper session within 30s")
		default:
		}
	}
	go func() {
		for range events {
		}
	}()
	return conn
}

// packetsReceived sums the servers' counts of client packets (mntr).
func packetsReceived(b *testing.B, ctx context.Context, addrs []string) int {
	b.Helper()
	total := 0
	for _, a := range addrs {
		out, err := padlocktest.FourLetter(ctx, a, "mntr")
		if err != nil {
			b.Fatal(err)
		}
		found := false
		for _, line := range strings.Split(out, "\n") {
			if v, ok := strings.CutPrefix(line, "zk_packets_received\t"); ok {
				n, err := strconv.Atoi(strings.TrimSpace(v))
				if err != nil {
					b.Fatal(err)
				}
				total, found = total+n, true
			}
		}
		if !found {
			b.Fatalf("no zk_packets_received in %s's mntr", a)
		}
	}
	return total
}
