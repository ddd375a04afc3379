package zookeeper_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/bench/benchutil"
	"github.com/padlock-go/padlock/padlocktest"
	_ "github.com/padlock-go/padlock/zookeeper"
)

// Compare padlock's ZooKeeper backend with go-zookeeper's own zk.Lock in
// one run, on one standalone server:
//
//	go test -run '^$' -bench . ./bench/zookeeper
//
// Uncontended measures one Lock+Unlock, padlock's and zk.Lock's in turns;
// Handoff has two clients contend for
// one name, holding it 1ms each, and reports the hand-off latency.
func BenchmarkUncontended(b *testing.B) {
	ctx := context.Background()
	l := benchutil.Open(b, "zk://"+zkAddr(b)+"/bench")
	m := zk.NewLock(benchConn(b), "/bench-native/u", zk.WorldACL(zk.PermAll))
	// Interleaved, cycle by cycle, so that neither gets the server's
	// (a JVM's) warm-up alone.
	benchutil.SideBySide(b,
		benchutil.Variant{Name: "padlock", Op: benchutil.Cycle(ctx, l, "u")},
		benchutil.Variant{Name: "zk.Lock", Op: func() error {
			if err := m.Lock(); err != nil {
				return err
			}
			return m.Unlock()
		}},
	)
}

func BenchmarkHandoff(b *testing.B) {
	ctx := context.Background()
	b.Run("padlock", func(b *testing.B) {
		ls := []*padlock.Locker{
			benchutil.Open(b, "zk://"+zkAddr(b)+"/bench"),
			benchutil.Open(b, "zk://"+zkAddr(b)+"/bench"),
		}
		benchutil.Contend(b, 2, time.Millisecond, func(i int) (func() error, error) {
			lk, err := ls[i].Lock(ctx, "h")
			if err != nil {
				return nil, err
			}
			return func() error { return lk.Unlock(ctx) }, nil
		})
	})
	b.Run("zk.Lock", func(b *testing.B) {
		ms := []*zk.Lock{
			zk.NewLock(benchConn(b), "/bench-native/h", zk.WorldACL(zk.PermAll)),
			zk.NewLock(benchConn(b), "/bench-native/h", zk.WorldACL(zk.PermAll)),
		}
		benchutil.Contend(b, 2, time.Millisecond, func(i int) (func() error, error) {
			if err := ms[i].Lock(); err != nil {
				return nil, err
			}
			return ms[i].Unlock, nil
		})
	})
}

// benchConn is a go-zookeeper connection with a session, closed when the
// benchmark ends.
func benchConn(b *testing.B) *zk.Conn {
	b.Helper()
	conn, events, err := zk.Connect([]string{zkAddr(b)}, 2*time.Second, zk.WithLogger(quiet{}))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(conn.Close)
	for ev := range events {
		if ev.State == zk.StateHasSession {
			break
		}
	}
	go func() {
		for range events {
		}
	}()
	return conn
}

// BenchmarkTLS compares zks:// with zk:// in one run, interleaved
// (benchutil.SideBySide), each on a standalone server of its own:
//
//	go test -run '^$' -bench TLS -benchtime 200x -count 3 ./bench/zookeeper
//
// LockUnlock is one uncontended Lock+Unlock on an open Locker; Open is
// Open and Close, where zks:// adds the handshakes and Open's probe, which
// waits a moment for the server's verdict on the client certificate.
func BenchmarkTLS(b *testing.B) {
	certs := padlocktest.NewCerts(b)
	srv := padlocktest.Start(b, padlocktest.ZooKeeper, padlocktest.TLS(certs))
	urls := []string{
		"zks://" + srv.Nodes()[0].Addr + "/bench-tls?" + url.Values{"ca": {certs.CA}, "cert": {certs.ClientCert}, "key": {certs.ClientKey}}.Encode(),
		"zk://" + zkAddr(b) + "/bench-tls",
	}
	ctx := context.Background()
	b.Run("LockUnlock", func(b *testing.B) {
		var vs []benchutil.Variant
		for i, name := range []string{"zks", "zk"} {
			l := benchutil.Open(b, urls[i])
			vs = append(vs, benchutil.Variant{Name: name, Op: benchutil.Cycle(ctx, l, "u")})
		}
		benchutil.SideBySide(b, vs...)
	})
	b.Run("Open", func(b *testing.B) {
		var vs []benchutil.Variant
		for i, name := range []string{"zks", "zk"} {
			vs = append(vs, benchutil.Variant{Name: name, Op: func() error {
				l, err := padlock.Open(ctx, urls[i])
				if err != nil {
					return err
				}
				return l.Close()
			}})
		}
		benchutil.SideBySide(b, vs...)
	})
}

// zkAddr is the address of the package's standalone ZooKeeper server.
func zkAddr(b *testing.B) string {
	return benchutil.Server(b, "zookeeper", padlocktest.ZooKeeper, padlocktest.Nodes(1)).Nodes()[0].Addr
}

// quiet keeps go-zookeeper's log lines out of the benchmark's output.
type quiet struct{}

func (quiet) Printf(string, ...any) {}
