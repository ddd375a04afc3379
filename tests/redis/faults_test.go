package redis_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/padlocktest"
	padredis "github.com/padlock-go/padlock/redis"
)

// acquire.lua answers a retried run of the same acquisition (its first run
// took the lock, and its answer was lost) as granted, with the same token
// and a fresh lease; another acquisition is refused as before.
func TestAcquireScriptRetried(t *testing.T) {
	needServers(t)
	src, err := os.ReadFile("../../redis/scripts/acquire.lua")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rdb := goredis.NewClient(&goredis.Options{Addr: single.Nodes()[0].Addr})
	defer rdb.Close()
	script := goredis.NewScript(string(src))
	keys := []string{"retry:{n}:lock", "retry:{n}:fence", "retry:{n}:queue", "retry:{n}:deadlines", "retry:{n}:holds", "retry:{n}:tokens", "retry:{n}:waiters", "retry:{n}:reserved"}
	defer rdb.Del(ctx, keys...)
	run := func(id string, ms int) []int64 {
		t.Helper()
		v, err := script.Run(ctx, rdb, keys, id, ms).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	first := run("id-1", 500)
	if first[0] != 1 {
		t.Fatalf("first run: %v, want granted", first)
	}
	again := run("id-1", 60000)
	if again[0] != 1 || again[1] != first[1] {
		t.Fatalf("retried run: %v, want granted with token %d", again, first[1])
	}
	if pttl := rdb.PTTL(ctx, keys[0]).Val(); pttl < 30*time.Second {
		t.Errorf("retried run left the lease at %v, want it counted again (a minute)", pttl)
	}
	if other := run("id-2", 500); other[0] != 0 || other[1] <= 0 {
		t.Errorf("another acquisition: %v, want refused with the holder's pttl", other)
	}
}

// Capabilities().HoldsSurviveRestart is read from the server at Open, and
// is true to what a restart does: with appendonly yes and appendfsync
// always a hold survives a crash and restart (another client still cannot
// take it, and its holder still can release it); without persistence the
// restarted server has forgotten it, and another client takes the lock at
// once. Where the user may not read the configuration, it is Unknown.
func TestHoldsSurviveRestart(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name string
		opts []padlocktest.Option
		want padlock.Tristate
	}{
		{"appendonly", []padlocktest.Option{padlocktest.RedisAppendOnly()}, padlock.Yes},
		{"no persistence", nil, padlock.No},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := padlocktest.Start(t, padlocktest.Redis, tc.opts...)
			url := srv.URL() + "/?prefix=restart"
			a, err := padlock.Open(ctx, url, padlock.WithTTL(30*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			b, err := padlock.Open(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if got := a.Capabilities().HoldsSurviveRestart; got != tc.want {
				t.Fatalf("HoldsSurviveRestart = %v, want %v", got, tc.want)
			}
			lk, err := a.Lock(ctx, "job")
			if err != nil {
				t.Fatal(err)
			}
			if err := srv.Restart(ctx); err != nil { // SIGKILL, then start again
				t.Fatal(err)
			}
			other, err := b.TryLock(ctx, "job")
			switch {
			case tc.want == padlock.Yes && !errors.Is(err, padlock.ErrNotAcquired):
				t.Errorf("TryLock after a restart of a server that persists: %v, want ErrNotAcquired: the hold survived", err)
			case tc.want == padlock.No && err != nil:
				t.Errorf("TryLock after a restart of a server without persistence: %v, want the lock: the server forgot the hold", err)
			}
			if other != nil {
				other.Unlock(ctx)
			}
			if tc.want == padlock.Yes {
				if err := lk.Unlock(ctx); err != nil {
					t.Errorf("Unlock of a hold that survived the restart: %v", err)
				}
			}
		})
	}

	// appendfsync everysec: a crash loses up to a second of grants.
	srv := padlocktest.Start(t, padlocktest.Redis, padlocktest.RedisAppendOnly())
	admin := goredis.NewClient(&goredis.Options{Addr: srv.Nodes()[0].Addr})
	defer admin.Close()
	if err := admin.ConfigSet(ctx, "appendfsync", "everysec").Err(); err != nil {
		t.Fatal(err)
	}
	// A user who may not read the configuration.
	if err := admin.Do(ctx, "ACL", "SETUSER", "noconfig", "on", ">pw", "~*", "&*", "+@all", "-config").Err(); err != nil {
		t.Fatal(err)
	}
	cli := goredis.NewClient(&goredis.Options{Addr: srv.Nodes()[0].Addr, ContextTimeoutEnabled: true})
	defer cli.Close()
	for _, c := range []struct {
		what string
		open func() (*padlock.Locker, error)
		want padlock.Tristate
	}{
		{"appendfsync everysec", func() (*padlock.Locker, error) { return padlock.Open(ctx, srv.URL()+"/?prefix=restart") }, padlock.No},
		{"redis.New, appendfsync everysec", func() (*padlock.Locker, error) { return padredis.New(ctx, cli, padredis.Options{}) }, padlock.No},
		{"a user without CONFIG", func() (*padlock.Locker, error) {
			return padlock.Open(ctx, "redis://noconfig:pw@"+srv.Nodes()[0].Addr+"/?prefix=restart")
		}, padlock.Unknown},
		{"Redis Cluster without persistence", func() (*padlock.Locker, error) { return padlock.Open(ctx, cluster.URL()+"/?prefix=restart") }, padlock.No},
		{"Sentinel without persistence", func() (*padlock.Locker, error) { return padlock.Open(ctx, sentinel.URL()+"?prefix=restart") }, padlock.No},
		{"RedLock without persistence", func() (*padlock.Locker, error) { return padlock.Open(ctx, masters3.URL()+"/?prefix=restart") }, padlock.No},
	} {
		l, err := c.open()
		if err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		if got := l.Capabilities().HoldsSurviveRestart; got != c.want {
			t.Errorf("%s: HoldsSurviveRestart = %v, want %v", c.what, got, c.want)
		}
		l.Close()
	}
	// RedLock: Yes only when every master persists.
	aof := padlocktest.Start(t, padlocktest.RedLock, padlocktest.Nodes(3), padlocktest.RedisAppendOnly())
	l, err := padlock.Open(ctx, aof.URL()+"/?prefix=restart")
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Capabilities().HoldsSurviveRestart; got != padlock.Yes {
		t.Errorf("RedLock over masters that persist: HoldsSurviveRestart = %v, want yes", got)
	}
	l.Close()
}

// With 5 RedLock masters a hold survives the loss of 2 (a quorum of 3
// remains) and is lost, with Done, when a third dies.
func TestRedLockMasterKilledMidHold(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	restartStopped(t, masters5)
	const ttl = 3 * time.Second
	url := "redlock://" + masters5.Addrs() + "/?prefix=kill&ttl=" + ttl.String()
	a, err := padlock.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := padlock.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	lk, err := a.Lock(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	masters5.Nodes()[0].Kill()
	masters5.Nodes()[1].Kill()
	// Three renewal periods on the surviving quorum: still held, still
	// exclusive. A TryLock needs all three survivors to answer within a
	// tenth of the TTL; on a loaded machine one may not (seen at a load
	// of 21), and the TryLock then has no quorum of answers: unavailable,
	// which says nothing either way. Every other TryLock must find the
	// name held, and at least one must get the quorum's answer.
	end := time.Now().Add(3 * ttl)
	refusedByQuorum := 0
	for time.Now().Before(end) {
		select {
		case <-lk.Done():
			t.Fatalf("hold lost with a quorum of masters alive: %v", lk.Err())
		case <-time.After(ttl / 4):
		}
		switch lk2, err := b.TryLock(ctx, "job"); {
		case err == nil:
			lk2.Unlock(ctx)
			t.Fatalf("TryLock succeeded while a quorum holds the name")
		case errors.Is(err, padlock.ErrNotAcquired):
			refusedByQuorum++
		case errors.Is(err, padlock.ErrUnavailable) && strings.Contains(err.Error(), "timeout"):
			t.Logf("TryLock with a slow survivor: %v", err)
		default:
			t.Fatalf("TryLock while held by a quorum = %v, want ErrNotAcquired", err)
		}
	}
	if refusedByQuorum == 0 {
		t.Fatalf("no TryLock in three renewal periods got the surviving quorum's answer")
	}
	killed := time.Now()
	masters5.Nodes()[2].Kill()
	select {
	case <-lk.Done():
	case <-time.After(2 * ttl):
		t.Fatalf("Done still open %v after the quorum was lost", time.Since(killed))
	}
	if took := time.Since(killed); took > ttl+time.Second {
		t.Errorf("Done closed %v after the quorum was lost, later than the TTL allows", took)
	}
	if !errors.Is(lk.Err(), padlock.ErrLost) {
		t.Errorf("Err = %v, want ErrLost", lk.Err())
	}
}

// A server that goes away under an open Locker is ErrUnavailable at once
// too, on TryLock, Lock and Unlock: the dial that finds it down is not
// retried (Sentinel: the primary goes, the Sentinel stays).
func TestServerGoneFailsFast(t *testing.T) {
	needServers(t)
	for _, tc := range []struct {
		name string
		url  string
		cut  func(addr string) bool // which addresses go
	}{
		{"single", "redis://" + single.Addrs() + "/?prefix=gone", all},
		{"cluster", cluster.URL() + "/?prefix=gone", all},
		{"sentinel", sentinel.URL() + "?prefix=gone", func(addr string) bool { return addr != sentinel.Sentinels()[0].Addr }},
		{"redlock", masters3.URL() + "/?prefix=gone", all},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			d := newCutDialer()
			l, err := padlock.Open(ctx, tc.url, padlock.WithDialer(d.dial))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			// A lease long enough that no renewal of it comes during the
			// checks (its first would come a third of the way in): a
			// renewal's dials, and its retries after the cut, would be
			// counted against the call being checked (seen under load).
			held, err := l.Lock(ctx, "held", padlock.WithTTL(3*time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			if d.Cut(tc.cut) == 0 {
				t.Fatal("no connection to cut")
			}
			before, _ := d.counts()
			_, err = l.TryLock(ctx, "free")
			checkRefused(t, "TryLock", err, d, before)
			if tc.name != "cluster" { // a cluster client may dial a node for the slots, then for the command
				// A try whose connection could not be dialed ran nowhere:
				// nothing is left to undo, so no cleanup dials again
				// (one did, before TryLock returned, and then retried in
				// the background into the next calls' counts).
				after, _ := d.counts()
				for addr, n := range after {
					if tc.cut(addr) && n-before[addr] > 1 {
						t.Errorf("TryLock dialed %s %d times: once for the try, and again to undo a try that never left", addr, n-before[addr])
					}
				}
			}
			before, _ = d.counts()
			_, err = l.Lock(ctx, "free", padlock.WithWait(time.Minute))
			checkRefused(t, "Lock", err, d, before)
			before, _ = d.counts()
			err = held.Unlock(ctx)
			checkRefused(t, "Unlock", err, d, before)
			// The servers come back: the release goes on in the
			// background until it succeeds, and leaves nothing behind
			// (else the name stays taken for its 3-minute lease).
			d.Cut(func(string) bool { return false })
			padlocktest.WaitFor(t, "the background release of the held name", time.Minute, func() bool {
				lk, err := l.TryLock(ctx, "held")
				if err == nil {
					lk.Unlock(ctx)
				}
				return err == nil
			})
		})
	}
}

func all(string) bool { return true }

// go-redis still retries what a live server needs retried: a request
// whose connection broke after the server ran it is sent again on a
// fresh connection, and the Lock it belongs to succeeds (the acquire
// script recognises its own retried run).
func TestBrokenConnectionRetried(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := single.Proxy(t)
	l, err := padlock.Open(ctx, "redis://"+p.Addr()+"/?prefix=broken")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// Once first, so that the server has the script (EVALSHA runs it, and
	// does not answer NOSCRIPT) and the client a connection.
	lk, err := l.TryLock(ctx, "warm")
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// Drop the answers: the acquire script runs, its answer never comes.
	heal, err := p.DropAnswers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		lk, err := l.TryLock(ctx, "retried")
		if err == nil {
			err = lk.Unlock(ctx)
		}
		done <- err
	}()
	admin := goredis.NewClient(&goredis.Options{Addr: single.Nodes()[0].Addr})
	defer admin.Close()
	padlocktest.WaitFor(t, "the acquire script ran", 30*time.Second, func() bool {
		keys, _ := admin.Keys(ctx, "broken:*:lock").Result()
		return len(keys) > 0
	})
	// Heal: the proxy closes the connection the answer was lost on.
	if err := heal(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("TryLock whose connection broke after the script ran: %v; go-redis must retry it on a fresh connection", err)
	}
}

// An acquisition whose lease runs out before the replicas confirm it is
// ErrUnavailable: Lock never returns ErrNotHeld. Here the replica is
// paused, so the first acquisition's WAIT runs out its time (half its 10s
// lease), and a second acquisition with a 1s lease, confirmed only after
// it, has lost its lease by then.
func TestLeaseRunsOutBeforeReplicas(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	primary, _, replica := sentinelNodes(t)
	l, err := padlock.Open(ctx, sentinel.URL()+"?prefix=runsout&wait_replicas=1")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := replica.Pause(); err != nil {
		t.Fatal(err)
	}
	defer replica.Resume()
	first := make(chan error, 1)
	go func() {
		_, err := l.Lock(ctx, "long", padlock.WithTTL(10*time.Second))
		first <- err
	}()
	padlocktest.WaitFor(t, "the first acquisition waiting for the replica", 30*time.Second, func() bool {
		info, _ := primary.Info(ctx, "clients").Result()
		return !strings.Contains(info, "blocked_clients:0\r")
	})
	_, err = l.Lock(ctx, "short", padlock.WithTTL(time.Second))
	if !errors.Is(err, padlock.ErrUnavailable) || errors.Is(err, padlock.ErrNotHeld) || !strings.Contains(err.Error(), "ran out before the replicas confirmed it") {
		t.Errorf("Lock whose lease ran out before the replicas confirmed it: %v, want ErrUnavailable saying so", err)
	}
	if err := <-first; !errors.Is(err, padlock.ErrUnavailable) || !strings.Contains(err.Error(), "0 of 1 replicas") {
		t.Errorf("Lock with the replica paused: %v, want ErrUnavailable naming the replica count", err)
	}
}

// A release goes once: when its connection breaks after the server ran
// it, Unlock says that the outcome is unknown (ErrUnavailable), never
// ErrNotHeld. go-redis used to send it again on a fresh connection, where
// the hold it had just released was gone, and Unlock told the caller
// that the lock had been lost under it.
func TestReleaseWithItsAnswerLost(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d := &answerDropper{}
	l, err := padlock.Open(ctx, "redis://"+single.Nodes()[0].Addr+"/?prefix=unlockonce", padlock.WithDialer(d.dial))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// Once first, so that the server has the release script (EVALSHA
	// runs it, and does not answer NOSCRIPT, whose answer lost would
	// prove nothing).
	lk, err := l.TryLock(ctx, "warm")
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lk, err = l.TryLock(ctx, "released", padlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	// The release runs, and its answer is lost with its connection.
	d.dropAnswerOfScript(1)
	err = lk.Unlock(ctx)
	ranOnce(ctx, t, d, "unlockonce:{released}:lock", "Unlock", err)
	select {
	case <-lk.Done():
	default:
		t.Error("Done still open after Unlock returned")
	}
	// The name is free for the next client, and the Locker's background
	// release, which finds the hold gone, leaves nothing behind.
	lk2, err := l.TryLock(ctx, "released")
	if err != nil {
		t.Fatalf("the released name: %v", err)
	}
	if err := lk2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// ranOnce checks a release whose answer d dropped: the release ran (the
// hold's lock key is gone), and the call that sent it (what, its err)
// says that its outcome is unknown, ErrUnavailable, never ErrNotHeld, as
// a second sending of it would have answered.
func ranOnce(ctx context.Context, t *testing.T, d *answerDropper, key, what string, err error) {
	t.Helper()
	if !d.dropped() {
		t.Fatalf("no answer was dropped (%s: %v)", what, err)
	}
	admin := goredis.NewClient(&goredis.Options{Addr: single.Nodes()[0].Addr})
	defer admin.Close()
	if n := admin.Exists(ctx, key).Val(); n != 0 {
		t.Fatalf("%s is still there: the release whose answer was dropped did not run (%s: %v)", key, what, err)
	}
	if errors.Is(err, padlock.ErrNotHeld) {
		t.Fatalf("%s of a hold it released, its answer lost: %v; want ErrUnavailable (outcome unknown), never ErrNotHeld", what, err)
	}
	if !errors.Is(err, padlock.ErrUnavailable) {
		t.Fatalf("%s with its answer lost: %v, want ErrUnavailable", what, err)
	}
}

// A forced release goes once too: when its connection breaks after the
// server ran it, ForceUnlock says that the outcome is unknown
// (ErrUnavailable), never ErrNotHeld ("changed hands meanwhile"), which
// go-redis's second sending of it answered for the hold it had just
// taken away.
func TestForceReleaseWithItsAnswerLost(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := "redis://" + single.Nodes()[0].Addr + "/?prefix=forceonce"
	owner, err := padlock.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	// A release first, so that the server has the release script, which
	// a forced release runs too (EVALSHA runs it, and does not answer
	// NOSCRIPT, whose answer lost would prove nothing).
	warm, err := owner.TryLock(ctx, "warm")
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// A short lease: the forced-out holder learns of it at its next
	// renewal, a third of the lease in.
	lk, err := owner.TryLock(ctx, "forced", padlock.WithTTL(6*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	d := &answerDropper{}
	op, err := padlock.Open(ctx, url, padlock.WithDialer(d.dial))
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	// Once first, so that the operator's Locker has a connection: a forced
	// release of a name nobody holds reads it, and finds nobody.
	if _, err := op.ForceUnlock(ctx, "warm"); !errors.Is(err, padlock.ErrNotHeld) {
		t.Fatalf("ForceUnlock of a free name: %v, want ErrNotHeld", err)
	}
	// ForceUnlock reads the holder (one script) and releases it (a
	// second): the release runs, and its answer is lost with its
	// connection.
	d.dropAnswerOfScript(2)
	_, err = op.ForceUnlock(ctx, "forced")
	ranOnce(ctx, t, d, "forceonce:{forced}:lock", "ForceUnlock", err)
	select {
	case <-lk.Done():
	case <-ctx.Done():
		t.Fatal("the forced-out holder's Done never closed")
	}
}

// answerDropper is a padlock.WithDialer function whose connections, once
// armed, let the nth script call (EVALSHA) after arming through, read its
// answer (the server ran it) and throw it away, closing the connection:
// an answer lost after the request ran.
type answerDropper struct {
	mu    sync.Mutex
	left  int  // script calls to let by, the last of them answered into nothing; 0: not armed
	drop  bool // the next read of the connection that sent it drops its answer
	conn  net.Conn
	count int // answers dropped
}

func (d *answerDropper) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &dropConn{Conn: c, d: d}, nil
}

// dropAnswerOfScript arms d: the answer of the nth script call from now
// is lost.
func (d *answerDropper) dropAnswerOfScript(n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.left = n
}

func (d *answerDropper) dropped() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.count > 0
}

type dropConn struct {
	net.Conn
	d *answerDropper
}

func (c *dropConn) Write(b []byte) (int, error) {
	c.d.mu.Lock()
	if c.d.left > 0 && bytes.Contains(bytes.ToLower(b), []byte("evalsha")) {
		if c.d.left--; c.d.left == 0 {
			c.d.drop, c.d.conn = true, c
		}
	}
	c.d.mu.Unlock()
	return c.Conn.Write(b)
}

func (c *dropConn) Read(b []byte) (int, error) {
	c.d.mu.Lock()
	drop := c.d.drop && c.d.conn == c
	c.d.mu.Unlock()
	if !drop {
		return c.Conn.Read(b)
	}
	if _, err := c.Conn.Read(b); err != nil { // the answer: the script ran
		return 0, err
	}
	c.d.mu.Lock()
	c.d.drop = false
	c.d.count++
	c.d.mu.Unlock()
	c.Conn.Close()
	return 0, io.EOF
}

// A RedLock waiter granted on a quorum tries once more on each master
// that refused it (the settling try), which also takes it out of that
// master's waiters. When that try fails, its place there is taken out as
// a waiter's that is done: left in, it would be the next release's one
// wake-up there, sent to nobody, and the name kept a moment for it.
func TestRedLockFailedSettlingTryLeavesNoWaiter(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	refusing := masters3.Nodes()[2].Addr
	f := &scriptFailer{addr: refusing}
	l, err := padlock.Open(ctx, "redlock://"+masters3.Addrs()+"/?prefix=settlefail", padlock.WithDialer(f.dial))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// Once first, so that every master has the acquire script (EVALSHA
	// runs it at once, with no NOSCRIPT answer in between).
	lk, err := l.TryLock(ctx, "warm")
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	admin := goredis.NewClient(&goredis.Options{Addr: refusing})
	defer admin.Close()
	const lockKey, waiters = "settlefail:{split}:lock", "settlefail:{split}:waiters"
	// Another client's key on one master: the waiter's round is granted
	// by the other two and refused there, where it joins the waiters.
	if err := admin.Set(ctx, lockKey, "another", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	defer admin.Del(context.Background(), lockKey)
	f.failScript(2) // the round's try there goes through; the settling try does not
	lk, err = l.Lock(ctx, "split", padlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	padlocktest.WaitFor(t, "the settling try sent", 30*time.Second, f.failed)
	padlocktest.WaitFor(t, "the granted waiter gone from the refusing master's waiters", 30*time.Second, func() bool {
		return admin.Exists(ctx, waiters).Val() == 0
	})
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// scriptFailer is a padlock.WithDialer function whose connections to one
// address, once armed, fail the nth script call (EVALSHA) after arming
// before it is sent, closing the connection: a request the server never
// ran.
type scriptFailer struct {
	addr  string
	mu    sync.Mutex
	left  int // script calls to let by, the last of them failed; 0: not armed
	count int // calls failed
}

func (f *scriptFailer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil || addr != f.addr {
		return c, err
	}
	return &failConn{Conn: c, f: f}, nil
}

// failScript arms f: the nth script call from now fails unsent.
func (f *scriptFailer) failScript(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.left = n
}

func (f *scriptFailer) failed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.count > 0
}

type failConn struct {
	net.Conn
	f *scriptFailer
}

func (c *failConn) Write(b []byte) (int, error) {
	c.f.mu.Lock()
	fail := false
	if c.f.left > 0 && bytes.Contains(bytes.ToLower(b), []byte("evalsha")) {
		if c.f.left--; c.f.left == 0 {
			fail = true
			c.f.count++
		}
	}
	c.f.mu.Unlock()
	if fail {
		c.Conn.Close()
		return 0, net.ErrClosed
	}
	return c.Conn.Write(b)
}
