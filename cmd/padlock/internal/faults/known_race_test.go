package faults

import "testing"

// A race report wholly inside go-zookeeper is known upstream; any other is
// a failure, and so is anything else on stderr beside it.
func TestKnownRaces(t *testing.T) {
	zk := `==================
WARNING: DATA RACE
Write at 0x00c0001ee000 by goroutine 77:
  github.com/go-zookeeper/zk.(*Conn).recvLoop()
      /root/go/pkg/mod/github.com/go-zookeeper/zk@v1.0.4/conn.go:910 +0xc4c

Previous read at 0x00c0001ee000 by goroutine 8:
  github.com/go-zookeeper/zk.(*Conn).sendSetWatches()
      /root/go/pkg/mod/github.com/go-zookeeper/zk@v1.0.4/conn.go:614 +0x472
==================
Found 1 data race(s)`
	ours := `==================
WARNING: DATA RACE
Write at 0x00c0001ee000 by goroutine 77:
  github.com/padlock-go/padlock.(*hold).end()
      /work/hold.go:10 +0xc4c

Previous read at 0x00c0001ee000 by goroutine 8:
  github.com/go-zookeeper/zk.(*Conn).sendSetWatches()
      /root/go/pkg/mod/github.com/go-zookeeper/zk@v1.0.4/conn.go:614 +0x472
==================
Found 1 data race(s)`
	if rest, n := splitKnownRaces(zk); rest != "" || n != 1 {
		t.Errorf("go-zookeeper's own race: rest %q, %d known", rest, n)
	}
	if rest, n := splitKnownRaces(ours); rest == "" || n != 0 {
		t.Errorf("a race in padlock taken for known: rest %q, %d known", rest, n)
	}
	if rest, n := splitKnownRaces("panic: boom\n" + zk); rest != "panic: boom" || n != 1 {
		t.Errorf("a panic beside a known race: rest %q, %d known", rest, n)
	}
}
