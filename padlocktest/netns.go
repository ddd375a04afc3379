package padlocktest

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// netLab is a small network of test hosts on this machine: a network
// namespace per host, each joined by a veth pair to a bridge in the test's
// own namespace, on a /24 of 10.213.0.0/16 that the lab picks. The test
// reaches every host through the bridge; partitions between hosts are
// blackhole routes inside their namespaces, so the test itself still
// reaches both sides. Needs root and iproute2's ip.
type netLab struct {
	id     string
	subnet int
	hosts  []*netHost

	mu     sync.Mutex
	routes map[[2]int]bool // blackholed (from, to) host pairs
}

// netHost is one host of a lab.
type netHost struct {
	ns string // network namespace
	ip string
}

// errNoNetns says why a lab cannot be made here.
func netnsMissing() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: network namespaces (Partitions) need root", ErrUnsupported)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("%w: ip, for Partitions (Debian package iproute2)", ErrMissing)
	}
	return nil
}

// newNetLab makes a lab of n hosts.
func newNetLab(n int) (*netLab, error) {
	if err := netnsMissing(); err != nil {
		return nil, err
	}
	var rnd [3]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, err
	}
	l := &netLab{id: fmt.Sprintf("pl%x", rnd), routes: map[[2]int]bool{}}
	// Choosing a subnet no interface has yet, and taking it, is one step
	// under a lock that every test process here shares.
	unlock, err := lockFile(filepath.Join(os.TempDir(), "padlocktest-netns.lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()
	used := map[int]bool{}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			var x, y int
			if _, err := fmt.Sscanf(a.String(), "10.213.%d.%d", &x, &y); err == nil {
				used[x] = true
			}
		}
	}
	for c := 1; c <= 250; c++ {
		if !used[c] {
			l.subnet = c
			break
		}
	}
	if l.subnet == 0 {
		return nil, fmt.Errorf("padlocktest: no free subnet in 10.213.0.0/16 for a network lab")
	}
	br := l.id + "b"
	if err := ipCmd("link", "add", br, "type", "bridge"); err != nil {
		return nil, err
	}
	steps := [][]string{
		{"addr", "add", fmt.Sprintf("10.213.%d.1/24", l.subnet), "dev", br},
		{"link", "set", br, "up"},
	}
	for i := range n {
		h := &netHost{ns: fmt.Sprintf("%sn%d", l.id, i+1), ip: fmt.Sprintf("10.213.%d.%d", l.subnet, i+2)}
		l.hosts = append(l.hosts, h)
		veth := fmt.Sprintf("%sv%d", l.id, i+1)
		steps = append(steps,
			[]string{"netns", "add", h.ns},
			[]string{"link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", h.ns},
			[]string{"link", "set", veth, "master", br},
			[]string{"link", "set", veth, "up"},
			[]string{"-n", h.ns, "addr", "add", h.ip + "/24", "dev", "eth0"},
			[]string{"-n", h.ns, "link", "set", "eth0", "up"},
			[]string{"-n", h.ns, "link", "set", "lo", "up"},
		)
	}
	for _, s := range steps {
		if err := ipCmd(s...); err != nil {
			l.close()
			return nil, err
		}
	}
	return l, nil
}

// wrap returns the command that runs path with args on host i.
func (l *netLab) wrap(i int, path string, args []string) (string, []string) {
	return "ip", append([]string{"netns", "exec", l.hosts[i].ns, path}, args...)
}

// cut blackholes the routes between every host of a and every host of b,
// both ways.
func (l *netLab) cut(a, b []int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	for _, i := range a {
		for _, j := range b {
			for _, p := range [][2]int{{i, j}, {j, i}} {
				if l.routes[p] {
					continue
				}
				if err := ipCmd("-n", l.hosts[p[0]].ns, "route", "add", "blackhole", l.hosts[p[1]].ip+"/32"); err != nil {
					errs = append(errs, err)
					continue
				}
				l.routes[p] = true
			}
		}
	}
	return errors.Join(errs...)
}

// heal removes every blackhole route.
func (l *netLab) heal() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	for p := range l.routes {
		if err := ipCmd("-n", l.hosts[p[0]].ns, "route", "del", "blackhole", l.hosts[p[1]].ip+"/32"); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(l.routes, p)
	}
	return errors.Join(errs...)
}

// close deletes the namespaces (and with them the veths' far ends) and
// the bridge.
func (l *netLab) close() {
	for _, h := range l.hosts {
		ipCmd("netns", "del", h.ns)
	}
	ipCmd("link", "del", l.id+"b")
}

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
