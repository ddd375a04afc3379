package bench

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clientCPU is the CPU time (user and system) this process has used.
func clientCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serverPIDs finds the processes on this machine that listen on addrs
// (host:port), through /proc: the servers whose CPU time the benchmark
// reports. Unless every address is a loopback one whose listener it finds
// (a server elsewhere, a /proc it may not read), it returns nil, and the
// servers' CPU time is not reported: a partial sum would pass for the
// whole. (A container engine's port forwarder would be found instead of
// the server; padlocktest's local provider runs the servers themselves.)
func serverPIDs(addrs []string) []int {
	ports := map[int]bool{}
	for _, a := range addrs {
		host, p, err := net.SplitHostPort(a)
		if err != nil {
			continue
		}
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			continue
		}
		if n, err := strconv.Atoi(p); err == nil {
			ports[n] = true
		}
	}
	if len(ports) == 0 || len(ports) < len(addrs) {
		return nil
	}
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		listeningInodes(f, ports, inodes)
	}
	if len(inodes) == 0 {
		return nil
	}
	if len(inodes) < len(ports) {
		return nil
	}
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		fds, err := os.ReadDir(p + "/fd")
		if err != nil {
			continue
		}
		for _, fd := range fds {
			l, err := os.Readlink(p + "/fd/" + fd.Name())
			if err == nil && strings.HasPrefix(l, "socket:[") && inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] {
				if pid, err := strconv.Atoi(filepath.Base(p)); err == nil && pid != os.Getpid() {
					pids = append(pids, pid)
				}
				break
			}
		}
	}
	return pids
}

// listeningInodes adds the inodes of f's listening sockets on ports.
func listeningInodes(f string, ports map[int]bool, inodes map[string]bool) {
	file, err := os.Open(f)
	if err != nil {
		return
	}
	defer file.Close()
	s := bufio.NewScanner(file)
	s.Scan() // the header
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 10 || fields[3] != "0A" { // 0A: LISTEN
			continue
		}
		_, hexPort, _ := strings.Cut(fields[1], ":")
		port, err := strconv.ParseInt(hexPort, 16, 32)
		if err == nil && ports[int(port)] {
			inodes[fields[9]] = true
		}
	}
}

// withChildren adds to pids their child processes: PostgreSQL serves each
// connection in a process the listener forked.
func withChildren(pids []int) []int {
	if len(pids) == 0 {
		return pids
	}
	parents := map[int]bool{}
	for _, p := range pids {
		parents[p] = true
	}
	out := slices.Clone(pids)
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		b, err := os.ReadFile(p + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(fields[1]); err == nil && parents[ppid] {
			if pid, err := strconv.Atoi(filepath.Base(p)); err == nil {
				out = append(out, pid)
			}
		}
	}
	return out
}

// clockTick is the unit of /proc/<pid>/stat's times (USER_HZ, 100 on
// Linux).
const clockTick = 10 * time.Millisecond

// processCPU is the CPU time pids have used (user and system).
func processCPU(pids []int) time.Duration { return statTimes(pids, 11) }

// serversCPU is the CPU time (user and system) that the server processes
// pids and their child processes have used so far: each process's own,
// and what its children that have ended used (cutime and cstime, counted
// once their parent has waited for them). The difference of two readings
// counts every child that ran between them, whether it lived throughout,
// started in between (a connection opened during a turn: padlock's
// advisory session on PostgreSQL connects at its first Lock, and a pool
// may grow) or ended in between. A child that the server waits for while
// a reading sweeps /proc could be counted twice (its own time, then in
// its parent's) or not at all: the reading is made again until the
// servers' ended children's time is the same before and after the sweep.
func serversCPU(pids []int) time.Duration {
	if len(pids) == 0 {
		return 0
	}
	var total time.Duration
	for range 10 {
		before := statTimes(pids, 13)
		all := withChildren(pids)
		total = statTimes(all, 11) + statTimes(all, 13)
		if statTimes(pids, 13) == before {
			break
		}
	}
	return total
}

// statTimes sums two adjacent times of /proc/<pid>/stat over pids, the
// first at index i of the fields after the command: 11 is utime and
// stime, 13 cutime and cstime.
func statTimes(pids []int, i int) time.Duration {
	var total time.Duration
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// The command may hold spaces: fields start after its ')'.
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) <= i+1 {
			continue
		}
		a, _ := strconv.ParseInt(fields[i], 10, 64)
		b2, _ := strconv.ParseInt(fields[i+1], 10, 64)
		total += time.Duration(a+b2) * clockTick
	}
	return total
}
