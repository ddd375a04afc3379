package padlocktest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
)

// A proxy's link listens on a port below the system's ephemeral range
// (32768 and up on Linux by default): Cut closes the listener and Restore
// binds the same port again, and a port from the ephemeral range can be
// taken meanwhile by any outgoing connection or port-0 listener of the
// machine (seen as "bind: address already in use" on a loaded machine).
// Below that range only another proxy could take it: every proxy of every
// test process reserves its port with a lock file for its life.
const (
	proxyPortLow   = 20000
	proxyPortHigh  = 32767
	proxyPortTries = 200
)

// reservedPort is a port a link holds, and its lock file.
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

// startLink starts a link of the proxy named name to up on a reserved
// port, and returns it with its reservation.
func startLink(name, up string) (*toxiproxy.Proxy, reservedPort, error) {
	dir := filepath.Join(os.TempDir(), "padlocktest-proxy-ports")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, reservedPort{}, err
	}
	var last error
	for range proxyPortTries {
		port := proxyPortLow + rand.IntN(proxyPortHigh-proxyPortLow+1)
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprint(port)), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return nil, reservedPort{}, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close() // another proxy's
			last = err
			continue
		}
		r := reservedPort{port, f}
		l := toxiproxy.NewProxy(proxies, name, fmt.Sprintf("127.0.0.1:%d", port), up)
		if err := l.Start(); err != nil {
			r.release() // taken by something else on the machine
			last = err
			continue
		}
		return l, r, nil
	}
	return nil, reservedPort{}, errors.Join(fmt.Errorf("padlocktest: no free proxy port in %d-%d after %d tries", proxyPortLow, proxyPortHigh, proxyPortTries), last)
}
