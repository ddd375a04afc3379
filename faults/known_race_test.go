package faults

import (
	"strings"
	"testing"
)

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
	// CreateContainer reading the response recvLoop decodes into (through
	// reflect) after ErrConnectionClosed.
	zk2 := `==================
WARNING: DATA RACE
Write at 0x00c00030a720 by goroutine 129:
  reflect.Value.SetString()
      /usr/local/go/src/reflect/value.go:2318 +0x87
  github.com/go-zookeeper/zk.decodePacketValue()
      /root/go/pkg/mod/github.com/go-zookeeper/zk@v1.0.4/structs.go:473 +0x369

Previous read at 0x00c00030a720 by goroutine 317:
  github.com/go-zookeeper/zk.(*Conn).CreateContainer()
      /root/go/pkg/mod/github.com/go-zookeeper/zk@v1.0.4/conn.go:1099 +0x27b
  github.com/padlock-go/padlock/zookeeper.(*driver).enqueue.func2()
      /tmp/ciA/zookeeper/acquire.go:118 +0xbe
==================
Found 1 data race(s)`
	if rest, n := splitKnownRaces(zk2); rest != "" || n != 1 {
		t.Errorf("go-zookeeper's CreateContainer race: rest %q, %d known", rest, n)
	}
	// The same shape, with padlock's code under reflect: not known.
	ours2 := strings.Replace(zk2, "github.com/go-zookeeper/zk.decodePacketValue()", "github.com/padlock-go/padlock/zookeeper.decode()", 1)
	if rest, n := splitKnownRaces(ours2); rest == "" || n != 0 {
		t.Errorf("a race in padlock under reflect taken for known: rest %q, %d known", rest, n)
	}
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
