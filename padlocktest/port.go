package padlocktest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// The ports of the servers and proxies tests start lie below the system's
// ephemeral range (32768 and up on Linux by default). A server stopped and
// started again, or a proxy Cut and Restored, binds its port again, and a
// port of the ephemeral range can be taken meanwhile by any outgoing
// connection or port-0 listener of the machine: CI saw MariaDB's restart
// abort with "Bind on TCP/IP port. Got error: 98: Address already in use",
// and the fault suite saw the same of proxies. Below that range only
// another test's server or proxy could take it, and each port is reserved
// with a lock file for as long as its holder needs it.
const (
	portLow   = 20000
	portHigh  = 32767
	portTries = 200
)

// reservedPort is a port reserved with its lock file.
type reservedPort struct {
	port int
	f    *os.File
}

func (r reservedPort) release() {
	if r.f != nil {
		syscall.Flock(int(r.f.Fd()), syscall.LOCK_UN)
		r.f.Close()
	}
}

// reservePort reserves a port no other test process has reserved, and on
// which bind succeeds (bind may keep what it bound, as a proxy's link does,
// or let it go).
func reservePort(bind func(port int) error) (reservedPort, error) {
	dir := filepath.Join(os.TempDir(), "padlocktest-ports")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return reservedPort{}, err
	}
	var last error
	for range portTries {
		port := portLow + rand.IntN(portHigh-portLow+1)
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return reservedPort{}, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close() // another test's
			last = err
			continue
		}
		r := reservedPort{port, f}
		if err := bind(port); err != nil {
			r.release() // taken by something else on the machine
			last = err
			continue
		}
		return r, nil
	}
	return reservedPort{}, errors.Join(fmt.Errorf("padlocktest: no free port in %d-%d after %d tries", portLow, portHigh, portTries), last)
}

// held are the ports FreePort gave out, reserved until the process exits
// (the system then drops the locks).
var held struct {
	sync.Mutex
	ports []reservedPort
}

// FreePort returns a free loopback TCP port for a server a test starts
// itself. It lies below the ephemeral range and stays reserved for this
// process until it exits, so that the server can always be started again
// on it.
func FreePort() (int, error) {
	r, err := reservePort(func(port int) error {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			return err
		}
		return l.Close()
	})
	if err != nil {
		return 0, err
	}
	held.Lock()
	held.ports = append(held.ports, r)
	held.Unlock()
	return r.port, nil
}
