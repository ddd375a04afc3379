package redis_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
	"github.com/padlock-go/padlock/padlocktest"
)

// With 5 RedLock masters a hold survives the loss of 2 (a quorum of 3
// remains) and is lost, with Done, when a third dies.
func TestRedLockMasterKilledMidHold(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	defer func() { // give the other tests their masters back
		for _, n := range masters5.Nodes() {
			if !n.Running() {
				n.Start(ctx)
			}
		}
	}()
	const ttl = 2 * time.Second
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
	// Three renewal periods on the surviving quorum: still held, still exclusive.
	end := time.Now().Add(3 * ttl)
	for time.Now().Before(end) {
		select {
		case <-lk.Done():
			t.Fatalf("hold lost with a quorum of masters alive: %v", lk.Err())
		case <-time.After(ttl / 4):
		}
		if lk2, err := b.TryLock(ctx, "job"); !errors.Is(err, padlock.ErrNotAcquired) {
			if err == nil {
				lk2.Unlock(ctx)
			}
			t.Fatalf("TryLock while held by a quorum = %v, want ErrNotAcquired", err)
		}
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

// wait_replicas=N runs WAIT after acquiring; with no replica to acknowledge,
// the lock is given back and Lock fails, leaving nothing behind.
func TestWaitReplicas(t *testing.T) {
	needServers(t)
	ctx := context.Background()
	h := newHarness(t, single, "redis", "wait_replicas=1")
	defer h.Close()
	l, err := h.NewLocker(ctx, padlock.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Lock(ctx, "replicated"); !errors.Is(err, padlock.ErrUnavailable) || !strings.Contains(err.Error(), "0 of 1 replicas") {
		t.Fatalf("Lock with wait_replicas=1 and no replica = %v, want ErrUnavailable naming the replica count", err)
	}
	if s, _ := h.State(ctx); len(s) != 0 {
		t.Errorf("a lock refused for want of replicas left %q", s)
	}
}

func TestOpenErrors(t *testing.T) {
	conformance.CheckOpenErrors(t, []conformance.OpenCase{
		{URL: "redis://127.0.0.1:1/?bogus=1", Want: padlock.ErrInvalidOption, Msg: "bogus"},
		{URL: "redis://127.0.0.1:1/?fair=maybe", Want: padlock.ErrInvalidOption, Msg: "fair"},
		{URL: "redis://127.0.0.1:1/?wait_replicas=-1", Want: padlock.ErrInvalidOption, Msg: "wait_replicas"},
		{URL: "redis://127.0.0.1:1/?prefix=a{b", Want: padlock.ErrInvalidOption, Msg: "hash tags"},
		{URL: "redis://127.0.0.1:1/", Want: padlock.ErrUnavailable, Msg: "127.0.0.1:1"},
		{URL: "redis+cluster:///", Want: padlock.ErrInvalidURL, Msg: "host:port"},
		{URL: "redis+cluster://a:1,b/", Want: padlock.ErrInvalidURL, Msg: "invalid port"},
		{URL: "redis+cluster://a:1,:2/", Want: padlock.ErrInvalidURL, Msg: `":2"`},
		{URL: "redis+cluster://127.0.0.1:1/?wait_replicas=1", Want: padlock.ErrInvalidOption, Msg: "wait_replicas"},
		{URL: "redlock://127.0.0.1:1/?drift=0.9", Want: padlock.ErrInvalidOption, Msg: "drift"},
		{URL: "redlock://127.0.0.1:1/?fair=true", Want: padlock.ErrInvalidOption, Msg: "fair"},
		{URL: "redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3/", Want: padlock.ErrUnavailable, Msg: "quorum"},
		{URL: "redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3/", Want: padlock.ErrUnavailable, Msg: "connection refused"},
		{URL: "redis://127.0.0.1:1/", Want: padlock.ErrUnavailable, Msg: "connection refused"},
		// Duplicate hosts would count one server twice towards a quorum.
		{URL: "redlock://h:1,h:1,h:1/", Want: padlock.ErrInvalidURL, Msg: "h:1 appears twice"},
		{URL: "redlock://H:1,h:1,g:1/", Want: padlock.ErrInvalidURL, Msg: "appears twice"},
		{URL: "redis+cluster://a:1,a:1/", Want: padlock.ErrInvalidURL, Msg: "appears twice"},
		// Each scheme lists exactly the parameters it accepts.
		{URL: "redis://127.0.0.1:1/?bogus=1", Want: padlock.ErrInvalidOption, Msg: "known: ttl, wait, prefix, fair, wait_replicas, password_file, password_env, ca, cert, key, server_name, db,"},
		{URL: "rediss://127.0.0.1:1/?bogus=1", Want: padlock.ErrInvalidOption, Msg: "known: ttl, wait, prefix, fair, wait_replicas, password_file, password_env, ca, cert, key, server_name, db,"},
		{URL: "redis+cluster://127.0.0.1:1/?dial_timeout=1s", Want: padlock.ErrInvalidOption, Msg: `"dial_timeout" for redis+cluster:// (known: ttl, wait, prefix, fair, password_file, password_env, ca, cert, key, server_name)`},
		{URL: "redlock://127.0.0.1:1/?bogus=1", Want: padlock.ErrInvalidOption, Msg: "(known: ttl, wait, prefix, drift, password_file, password_env, ca, cert, key, server_name)"},
		{URL: "redis+sentinel://127.0.0.1:1/", Want: padlock.ErrInvalidURL, Msg: "the master's name as its path"},
		{URL: "redis+sentinel://127.0.0.1:1/a/b", Want: padlock.ErrInvalidURL, Msg: "the master's name as its path"},
		{URL: "redis+sentinel://127.0.0.1:1/m?bogus=1", Want: padlock.ErrInvalidOption, Msg: "(known: ttl, wait, prefix, fair, wait_replicas, sentinel_username, sentinel_password_env, dial_timeout,"},
		{URL: "redis+sentinel://127.0.0.1:1/m?sentinel_password_env=PADLOCK_TEST_UNSET_PW", Want: padlock.ErrInvalidOption, Msg: "$PADLOCK_TEST_UNSET_PW is not set"},
		{URL: "redis+sentinel://127.0.0.1:1/m?dial_timeout=soon", Want: padlock.ErrInvalidOption, Msg: "dial_timeout"},
		{URL: "redis+sentinel://127.0.0.1:1/m", Want: padlock.ErrUnavailable, Msg: "m via 127.0.0.1:1"},
		{URL: "rediss://127.0.0.1:1/?ca=/nonexistent/ca.pem", Want: padlock.ErrInvalidOption, Msg: "ca=/nonexistent/ca.pem"},
		{URL: "redis://127.0.0.1:1/?cert=/tmp/x.pem", Want: padlock.ErrInvalidOption, Msg: "cert= and key= go together"},
		{URL: "redis://u:s3cret@127.0.0.1:1/?password_file=/tmp/pw", Want: padlock.ErrInvalidOption, Msg: "password_file= and password_env= at once"},
		{URL: "redlock://127.0.0.1:1/?fair=false", Want: padlock.ErrInvalidOption, Msg: "no fair mode"},
		{URL: "redis://127.0.0.1:1/?prefix=a&prefix=b", Want: padlock.ErrInvalidOption, Msg: "2 times"},
		// A password never shows in an error.
		{URL: "redis://u:s3cret@127.0.0.1:1/?bogus=1", Want: padlock.ErrInvalidOption, Msg: "bogus"},
	})
	for _, u := range []string{"redis://u:s3cret@127.0.0.1:1/", "redlock://u:s3cret@127.0.0.1:1/", "redis://u:s3cret@127.0.0.1:1/%zz"} {
		if _, err := padlock.Open(context.Background(), u); err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%q) = %v: must fail without showing the password", u, err)
		}
	}
}

// All of a Locker's waits share ONE pub/sub connection: with waiters on 10
// names, the server sees one subscribed connection for that client, with 10
// channels, and none left once the waits are over.
func TestOnePubSubConnectionPerLocker(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h := newHarness(t, single, "redis", "")
	defer h.Close()
	a, err := h.NewLocker(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := h.NewLocker(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const n = 10
	var held []*padlock.Lock
	for i := range n {
		lk, err := a.Lock(ctx, fmt.Sprintf("pubsub/%d", i))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, lk)
	}
	res := make(chan error, n)
	for i := range n {
		go func() {
			lk, err := b.Lock(ctx, fmt.Sprintf("pubsub/%d", i))
			if err == nil {
				err = lk.Unlock(ctx)
			}
			res <- err
		}()
	}
	user := h.userOf(b)
	subscribed := func() (conns, channels int) {
		list, err := h.admin[0].ClientList(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(list, "\n") {
			if !strings.Contains(line, " user="+user+" ") {
				continue
			}
			for _, f := range strings.Fields(line) {
				if v, ok := strings.CutPrefix(f, "sub="); ok && v != "0" {
					conns++
					fmt.Sscan(v, &channels)
				}
			}
		}
		return conns, channels
	}
	for {
		conns, channels := subscribed()
		if conns > 1 {
			t.Fatalf("%d subscribed connections for one Locker, want 1", conns)
		}
		if conns == 1 && channels == n {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiters never all subscribed: %d connections, %d channels", conns, channels)
		case <-time.After(10 * time.Millisecond):
		}
	}
	for _, lk := range held {
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		if err := <-res; err != nil {
			t.Fatal(err)
		}
	}
	for {
		if _, channels := subscribed(); channels == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("channels still subscribed after every wait ended")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// A non-fair client must not jump fair clients waiting in line: it sees the
// live queue and leaves a free lock to its head. Fair clients B and C queue
// behind A, then non-fair D waits too; A's release must go to B, then C,
// then D.
func TestFairQueueRespectedByNonFairClient(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fair := newHarness(t, single, "redis", "fair=true")
	defer fair.Close()
	plain := newHarness(t, single, "redis", "")
	plain.prefix = fair.prefix // same keys, other mode
	defer plain.Close()
	open := func(h *harness) *padlock.Locker {
		l, err := h.NewLocker(ctx, padlock.WithTTL(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	a, b, c, d := open(fair), open(fair), open(fair), open(plain)
	const name = "mixed"
	lk, err := a.Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		order []string
		wg    sync.WaitGroup
	)
	wait := func(who string, l *padlock.Locker) {
		wg.Go(func() {
			lk, err := l.Lock(ctx, name)
			if err != nil {
				t.Errorf("%s: %v", who, err)
				return
			}
			mu.Lock()
			order = append(order, who)
			mu.Unlock()
			lk.Unlock(ctx)
		})
	}
	queued := func(n int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			s, err := fair.State(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(s) == n+1 { // the lock and n queue entries
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %d queued waiters: state %q", n, s)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	wait("B", b)
	queued(1)
	wait("C", c)
	queued(2)
	wait("D", d)
	// D keeps no server state while it waits; its pub/sub subscription
	// (B, C and D each subscribe on their own connection) shows it waits.
	channel := fair.prefix + ":{" + name + "}:wake"
	padlocktest.WaitFor(t, "D subscribing (three subscribers)", 30*time.Second, func() bool {
		n, err := fair.admin[0].PubSubNumSub(ctx, channel).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n[channel] == 3
	})
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if got := strings.Join(order, ""); got != "BCD" {
		t.Errorf("acquisition order %s, want BCD: the non-fair client jumped the fair queue", got)
	}
}
