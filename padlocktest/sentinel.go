package padlocktest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/padlock-go/padlock/conformance"
)

// SentinelMaster is the name under which a RedisSentinel server's Sentinel
// monitors its primary: the path of its URL.
const SentinelMaster = "padlock"

// sentinelGroup is a primary, its replicas and the Sentinel that fails them
// over.
type sentinelGroup struct {
	data     *redisGroup
	sentinel *redisGroup
}

func (g *sentinelGroup) Close() {
	g.sentinel.Close()
	g.data.Close()
}

// startSentinelN starts a primary and n-1 replicas of it, and one Redis
// Sentinel (redis-server --sentinel) that monitors the primary with a
// quorum of one and fails over after a second of silence. It returns once
// every replica has synchronised and the Sentinel knows them all.
func startSentinelN(ctx context.Context, n int, fake bool, keyspace string) (*sentinelGroup, error) {
	return retryStart(ctx, func(ctx context.Context) (*sentinelGroup, error) {
		data, err := startRedis(ctx, n, redisOpts{fake: fake, replicas: true, keyspace: keyspace})
		if err != nil {
			return nil, err
		}
		g := &sentinelGroup{data: data}
		if g.sentinel, err = startSentinelProc(ctx, data.Nodes[0].Addr); err != nil {
			data.Close()
			return nil, err
		}
		if err := g.settle(ctx); err != nil {
			g.Close()
			return nil, err
		}
		return g, nil
	})
}

// startSentinelProc starts the Sentinel, monitoring primary.
func startSentinelProc(ctx context.Context, primary string) (*redisGroup, error) {
	g, bin, port, err := oneRedis("padlock-sentinel-")
	if err != nil {
		return nil, err
	}
	host, pport, _ := strings.Cut(primary, ":")
	// Sentinel rewrites its configuration file as it learns: it must be a
	// file of its own, writable.
	conf := filepath.Join(g.Dir(), "sentinel.conf")
	text := fmt.Sprintf(`port %d
bind 127.0.0.1
protected-mode no
daemonize no
logfile ""
dir %s
sentinel monitor %s %s %s 1
sentinel down-after-milliseconds %s 1000
sentinel failover-timeout %s 5000
sentinel parallel-syncs %s 1
`, port, g.Dir(), SentinelMaster, host, pport, SentinelMaster, SentinelMaster, SentinelMaster)
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		g.Close()
		return nil, err
	}
	r := &redisNode{Addr: fmt.Sprintf("127.0.0.1:%d", port), process: &process{
		Name: fmt.Sprintf("sentinel-%d", port), Path: bin, Args: []string{conf, "--sentinel"}, Dir: g.Dir(),
		Ready: "+monitor master"}}
	r.Probe = r.ping
	return g.startOne(ctx, r)
}

// settle waits until the Sentinel names a primary that is one of the data
// nodes, and every other data node is its replica, in sync, and known to
// the Sentinel; and until the Sentinel has had an answer from that
// primary since settle began, with no failover under way. Without the
// last, a restart that took longer than the Sentinel's down-after time
// left a failover to start after settle returned: the conformance suite's
// ManyLocks, run after ServerRestartWhileWaiting, then saw the primary
// change under it, and every acquisition's WAIT find no replica in sync
// for seconds ("0 of 1 replicas acknowledged").
func (g *sentinelGroup) settle(ctx context.Context) error {
	s := g.sentinel.Nodes[0]
	began := time.Now()
	var last string
	err := conformance.Poll(ctx, 50*time.Millisecond, func() bool {
		if out, err := s.CLI(ctx, "sentinel", "master", SentinelMaster); err != nil || !calm(out, time.Since(began)) {
			last = fmt.Sprintf("the Sentinel has not seen the primary up since the start, or fails it over: %v %s", err, strings.Join(strings.Fields(out), " "))
			return false
		}
		out, err := s.CLI(ctx, "sentinel", "get-master-addr-by-name", SentinelMaster)
		if err != nil {
			last = err.Error()
			return false
		}
		primary := strings.Join(strings.Fields(out), ":")
		replicas, _ := s.CLI(ctx, "sentinel", "replicas", SentinelMaster)
		for _, r := range g.data.Nodes {
			if r.Addr == primary {
				continue
			}
			info, _ := r.CLI(ctx, "info", "replication")
			_, port, _ := strings.Cut(r.Addr, ":")
			_, pport, _ := strings.Cut(primary, ":")
			if infoField(info, "master_link_status") != "up" || infoField(info, "master_port") != pport ||
				!slices.Contains(strings.Fields(replicas), port) {
				last = fmt.Sprintf("replica %s not in sync with %s, or unknown to the Sentinel", r.Addr, primary)
				return false
			}
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("redis sentinel never settled: %s: %w", last, err)
	}
	return nil
}

// calm reports whether SENTINEL MASTER's answer (field and value on lines
// of their own) says the primary is up with no failover under way
// (flags exactly "master") and answered a ping less than since ago.
func calm(out string, since time.Duration) bool {
	f := strings.Fields(out)
	fields := map[string]string{}
	for i := 0; i+1 < len(f); i += 2 {
		fields[f[i]] = f[i+1]
	}
	ms, err := strconv.ParseInt(fields["last-ok-ping-reply"], 10, 64)
	return err == nil && fields["flags"] == "master" && time.Duration(ms)*time.Millisecond < since
}

// Sentinels are a RedisSentinel server's Sentinel nodes (none on other
// kinds). Its Nodes are the data nodes: the first node started as the
// primary, the others as its replicas; after a failover, ask a Sentinel
// which is the primary now (SENTINEL get-master-addr-by-name).
func (s *Server) Sentinels() []*Node { return s.sentinels }

// infoField is a field of a Redis INFO answer ("" if absent).
func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}
