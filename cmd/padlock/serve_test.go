package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
	"github.com/padlock-go/padlock/padlocktest"
)

// The console over HTTP, against an embedded etcd: the page, the pushed
// snapshots following a hold, its hand-off and its release, /metrics,
// /healthz, and force-unlock guarded by the page's token and origin.
func TestConsole(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url := startEtcd(t, ctx)
	c, srv := serveConsole(t, ctx, url, true)

	page := get(t, srv.URL+"/")
	if !strings.Contains(page, "padlock console") || !strings.Contains(page, c.csrf) {
		t.Errorf("page lacks its title or token:\n%.300s", page)
	}
	sctx, stopStream := context.WithCancel(ctx)
	defer stopStream()
	snaps := stream(t, sctx, srv.URL+"/events")
	next := nextSnapshot(t, ctx, snaps)

	a, b := openT(t, ctx, url), openT(t, ctx, url)
	lk, err := a.Lock(padlock.WithOwner(ctx, "alice"), "web/x")
	if err != nil {
		t.Fatal(err)
	}
	next("the hold", func(s snapshot) bool {
		return len(s.Holders) == 1 && s.Holders[0].Token == lk.Token() && s.Holders[0].Owner == "alice"
	})
	res := make(chan *padlock.Lock, 1)
	go func() {
		lk2, err := b.Lock(ctx, "web/x")
		if err != nil {
			t.Error(err)
		}
		res <- lk2
	}()
	next("the waiter", func(s snapshot) bool { return len(s.Holders) == 1 && s.Holders[0].Waiters == 1 })
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lk2 := <-res
	s := next("the hand-off", func(s snapshot) bool { return len(s.Holders) == 1 && s.Holders[0].Token == lk2.Token() })
	if s.History[0].Event != "handed off" || s.Counters.Handoffs != 1 {
		t.Errorf("history after a hand-off: %+v, counters %+v", s.History, s.Counters)
	}

	// Force-unlock: refused without the page's token or from elsewhere.
	for _, tc := range []struct {
		token, origin string
		want          int
	}{{"", "", http.StatusForbidden}, {c.csrf, "http://evil.example", http.StatusForbidden}, {c.csrf, srv.URL, http.StatusOK}} {
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/unlock", strings.NewReader(`{"name":"web/x"}`))
		req.Header.Set("X-Padlock-CSRF", tc.token)
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("unlock with token %q origin %q = %d, want %d", tc.token, tc.origin, resp.StatusCode, tc.want)
		}
	}
	select {
	case <-lk2.Done():
	case <-ctx.Done():
		t.Fatal("the force-unlocked hold's Done never closed")
	}
	s = next("no holder", func(s snapshot) bool { return len(s.Holders) == 0 })
	if s.History[0].Event != "force-unlocked" || s.History[0].Token != lk2.Token() || s.Counters.Forced != 1 || s.Counters.Released != 0 {
		t.Errorf("history after the page's force-unlock: %+v, counters %+v; want it force-unlocked, once", s.History, s.Counters)
	}

	if m := get(t, srv.URL+"/metrics"); !strings.Contains(m, "padlock_console_events") || !strings.Contains(m, "padlock_console_holders") {
		t.Errorf("/metrics lacks the console's instruments:\n%.500s", m)
	}
	if h := get(t, srv.URL+"/healthz"); strings.TrimSpace(h) != "ok" {
		t.Errorf("/healthz = %q", h)
	}
	// A read-only console refuses even a well-formed request.
	ro, roSrv := serveConsole(t, ctx, url, false)
	req, _ := http.NewRequestWithContext(ctx, "POST", roSrv.URL+"/unlock", strings.NewReader(`{"name":"web/x"}`))
	req.Header.Set("X-Padlock-CSRF", ro.csrf)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("unlock on a read-only console = %v, %v", resp, err)
	} else {
		resp.Body.Close()
	}
}

// A force-unlock from the command line (padlock unlock --force), which
// the console learns of only from the server, counts as forced, not as a
// hand-off or a release: with a waiter that takes the lock next, and
// without.
func TestConsoleCountsCLIForceUnlock(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for name, url := range map[string]string{"mem": "mem://console-forced", "etcd": startEtcd(t, ctx)} {
		t.Run(name, func(t *testing.T) {
			_, srv := serveConsole(t, ctx, url, false)
			sctx, stopStream := context.WithCancel(ctx)
			defer stopStream()
			snaps := stream(t, sctx, srv.URL+"/events")
			next := nextSnapshot(t, ctx, snaps)
			a, b := openT(t, ctx, url), openT(t, ctx, url)
			lk, err := a.Lock(ctx, "web/cli")
			if err != nil {
				t.Fatal(err)
			}
			next("the hold", func(s snapshot) bool { return len(s.Holders) == 1 && s.Holders[0].Token == lk.Token() })
			res := make(chan *padlock.Lock, 1)
			go func() {
				lk2, err := b.Lock(ctx, "web/cli")
				if err != nil {
					t.Error(err)
				}
				res <- lk2
			}()
			waitWaiting(t, ctx, a, "web/cli")
			unlock := func() {
				t.Helper()
				var out strings.Builder
				if err := runUnlock(ctx, []string{"--url", url, "--force", "--yes", "web/cli"}, strings.NewReader(""), &out); err != nil {
					t.Fatalf("padlock unlock --force: %v", err)
				}
			}
			unlock()
			lk2 := <-res
			if lk2 == nil {
				t.FailNow()
			}
			s := next("the next holder", func(s snapshot) bool { return len(s.Holders) == 1 && s.Holders[0].Token == lk2.Token() })
			if s.Counters.Forced != 1 || s.Counters.Handoffs != 0 || s.Counters.Acquired != 2 || s.History[1].Event != "force-unlocked" || s.History[1].Token != lk.Token() {
				t.Errorf("after a forced release taken by a waiter: history %+v, counters %+v; want force-unlocked, then acquired", s.History, s.Counters)
			}
			unlock()
			s = next("no holder", func(s snapshot) bool { return len(s.Holders) == 0 })
			if s.Counters.Forced != 2 || s.Counters.Released != 0 || s.History[0].Event != "force-unlocked" || s.History[0].Token != lk2.Token() {
				t.Errorf("after a forced release with nobody waiting: history %+v, counters %+v; want force-unlocked", s.History, s.Counters)
			}
			// A release by the holder is still a release.
			lk3, err := a.Lock(ctx, "web/cli")
			if err != nil {
				t.Fatal(err)
			}
			next("the third hold", func(s snapshot) bool { return len(s.Holders) == 1 && s.Holders[0].Token == lk3.Token() })
			if err := lk3.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			s = next("the release", func(s snapshot) bool { return len(s.Holders) == 0 && s.History[0].Token == lk3.Token() })
			if s.Counters.Forced != 2 || s.Counters.Released != 1 || s.History[0].Event != "released" {
				t.Errorf("after a release: history %+v, counters %+v", s.History, s.Counters)
			}
		})
	}
}

// waitWaiting waits until a Lock call waits for name, as Holders counts
// waiters (mem and etcd do; not every backend can).
func waitWaiting(t *testing.T, ctx context.Context, l *padlock.Locker, name string) {
	t.Helper()
	for {
		hs, err := l.Holders(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if len(hs) == 1 && hs[0].Waiters == 1 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("the waiter never waited")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// serveConsole runs a console of url's locks under web/, polling every
// 50ms, behind a test HTTP server, until the test ends.
func serveConsole(t *testing.T, ctx context.Context, url string, allowUnlock bool) (*console, *httptest.Server) {
	t.Helper()
	return serveConsoleEvery(t, ctx, url, 50*time.Millisecond, allowUnlock)
}

// serveConsoleEvery is serveConsole reading the holders every interval.
func serveConsoleEvery(t *testing.T, ctx context.Context, url string, interval time.Duration, allowUnlock bool) (*console, *httptest.Server) {
	t.Helper()
	c, err := newConsole(ctx, url, "web/", interval, allowUnlock)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c.handler())
	rctx, stop := context.WithCancel(ctx)
	go c.run(rctx)
	t.Cleanup(func() { stop(); srv.Close(); c.close() })
	return c, srv
}

// openT opens a Locker on url whose holds have a 15s lease: long enough
// that no renewal comes late on a loaded machine, so the console tests'
// holds end only as each test ends them.
func openT(t *testing.T, ctx context.Context, url string) *padlock.Locker {
	t.Helper()
	return openTTL(t, ctx, url, 15*time.Second)
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// nextSnapshot returns a function that reads snaps until a snapshot
// satisfies ok and returns it, and fails t, naming what it waited for,
// if ctx ends first.
func nextSnapshot(t *testing.T, ctx context.Context, snaps <-chan snapshot) func(what string, ok func(snapshot) bool) snapshot {
	return func(what string, ok func(snapshot) bool) snapshot {
		t.Helper()
		var last *snapshot
		for {
			select {
			case s := <-snaps:
				if ok(s) {
					return s
				}
				last = &s
			case <-ctx.Done():
				if last == nil {
					t.Fatalf("no snapshot with %s, and none at all", what)
				}
				// What the page last showed, for a failure that cannot be
				// run again.
				history := last.History[max(0, len(last.History)-4):]
				t.Fatalf("no snapshot with %s; the last, at %s: error %q, holders %+v, last events %+v",
					what, last.At.Format(time.RFC3339Nano), last.Error, last.Holders, history)
			}
		}
	}
}

// stream reads the server-sent snapshots of url until ctx ends.
func stream(t *testing.T, ctx context.Context, url string) <-chan snapshot {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan snapshot, 64)
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var s snapshot
			if json.Unmarshal([]byte(data), &s) == nil {
				select {
				case out <- s:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}

// The console follows every hold of a name, not one per name: readers and
// permits each come and go with an event of their own, a leader shows its
// value, and a writer taking over from the last reader is a hand-off. The
// test looks (poll) itself, so every change is seen exactly once.
func TestConsoleSharedHolds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := "mem://console-shared"
	c, err := newConsole(ctx, url, "web/", time.Hour, false)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	l := openT(t, ctx, url)
	look := func(what string, kinds []string, want counters) snapshot {
		t.Helper()
		c.poll(ctx)
		c.mu.Lock()
		s := c.snap
		c.mu.Unlock()
		var got []string
		for _, h := range s.Holders {
			k := h.Name + " " + h.Kind
			if h.Value != "" {
				k += " " + h.Value
			}
			got = append(got, k)
		}
		if !slices.Equal(got, kinds) || s.Counters != want || s.Error != "" {
			t.Fatalf("%s: holders %q, counters %+v (error %q); want %q, %+v", what, got, s.Counters, s.Error, kinds, want)
		}
		return s
	}
	r1, err := l.RLock(ctx, "web/doc")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := l.RLock(ctx, "web/doc")
	if err != nil {
		t.Fatal(err)
	}
	look("two readers", []string{"web/doc reader", "web/doc reader"}, counters{Acquired: 2})
	if err := r1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	s := look("one reader left", []string{"web/doc reader"}, counters{Acquired: 2, Released: 1})
	if s.History[0].Event != "released" || s.History[0].Token != r1.Token() {
		t.Errorf("history after a reader left: %+v", s.History)
	}
	wrote := make(chan *padlock.Lock, 1)
	go func() {
		w, err := l.Lock(ctx, "web/doc")
		if err != nil {
			t.Error(err)
		}
		wrote <- w
	}()
	conformance.WaitFor(ctx, t, "the writer waiting", time.Minute, func() bool {
		hs, err := l.Holders(ctx, "web/doc")
		return err == nil && len(hs) == 1 && hs[0].Waiters == 1
	})
	if err := r2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	w := <-wrote
	s = look("the writer after the readers", []string{"web/doc writer"}, counters{Acquired: 3, Handoffs: 1, Released: 1})
	if s.History[0].Event != "handed off" || s.History[0].Token != w.Token() {
		t.Errorf("history after the hand-off: %+v", s.History)
	}
	p1, err := l.Lock(ctx, "web/sem", padlock.WithLimit(2))
	if err != nil {
		t.Fatal(err)
	}
	p2, err := l.Lock(ctx, "web/sem", padlock.WithLimit(2))
	if err != nil {
		t.Fatal(err)
	}
	ld, err := l.Election("web/lead").Campaign(ctx, "10.0.0.7:8080")
	if err != nil {
		t.Fatal(err)
	}
	look("permits and a leader", []string{"web/doc writer", "web/lead leader 10.0.0.7:8080", "web/sem permit 1/2", "web/sem permit 2/2"},
		counters{Acquired: 6, Handoffs: 1, Released: 1})
	for _, f := range []func(context.Context) error{w.Unlock, p1.Unlock, p2.Unlock, ld.Resign} {
		if err := f(ctx); err != nil {
			t.Fatal(err)
		}
	}
	look("all gone", nil, counters{Acquired: 6, Handoffs: 1, Released: 5})
}

// A force-unlock from the page marks as forced only the holds there when
// it forced: a reader that left on its own between the console's last
// look and the force-unlock is released, not forced (the page used to
// mark every hold of the name its last look had seen).
func TestConsoleForceUnlockAfterAReaderLeft(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := "mem://console-force-after-leave"
	c, err := newConsole(ctx, url, "web/", time.Hour, true)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	l := openT(t, ctx, url)
	r1, err := l.RLock(ctx, "web/doc")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := l.RLock(ctx, "web/doc")
	if err != nil {
		t.Fatal(err)
	}
	look := func() snapshot {
		c.poll(ctx)
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.snap
	}
	if s := look(); len(s.Holders) != 2 {
		t.Fatalf("holders %+v, want the two readers", s.Holders)
	}
	if err := r1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequestWithContext(ctx, "POST", "/unlock", strings.NewReader(`{"name":"web/doc"}`))
	req.Header.Set("X-Padlock-CSRF", c.csrf)
	rec := httptest.NewRecorder()
	c.unlock(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("force-unlock = %d %s", rec.Code, rec.Body)
	}
	select {
	case <-r2.Done():
	case <-ctx.Done():
		t.Fatal("the forced reader's Done never closed")
	}
	s := look()
	if want := (counters{Acquired: 2, Released: 1, Forced: 1}); s.Counters != want || len(s.Holders) != 0 {
		t.Fatalf("after a reader left and the other was forced: counters %+v, holders %+v; want %+v and none", s.Counters, s.Holders, want)
	}
	for _, e := range s.History[:2] {
		if want := map[uint64]string{r1.Token(): "released", r2.Token(): "force-unlocked"}[e.Token]; e.Event != want {
			t.Errorf("history %+v: token %d is %q, want %q", s.History, e.Token, e.Event, want)
		}
	}
}

// One console over several backends (--url given twice): a tab per
// backend on the page, each backend's holds on its own stream, a
// force-unlock that reaches only the backend it names, /healthz for all of
// them, and /metrics with each console's instruments told apart by
// backend. A backend given twice, or none, is a usage error.
func TestConsoleSeveralBackends(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	urls := []string{"mem://console-deck-a", "mem://console-deck-b"}
	d, err := newDeck(ctx, urls, "web/", time.Hour, true)
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	srv := httptest.NewServer(d.handler())
	defer srv.Close()
	a, b := openT(t, ctx, urls[0]), openT(t, ctx, urls[1])
	if _, err := a.Lock(ctx, "web/on-a"); err != nil {
		t.Fatal(err)
	}
	lb, err := b.Lock(ctx, "web/on-b")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range d.consoles {
		c.poll(ctx) // the next look, once: the streams start with it
	}
	for i, want := range []string{"web/on-a", "web/on-b"} {
		sctx, stop := context.WithCancel(ctx)
		s := <-stream(t, sctx, fmt.Sprintf("%s/events?backend=%d", srv.URL, i))
		stop()
		if len(s.Holders) != 1 || s.Holders[0].Name != want {
			t.Errorf("backend %d's stream shows %+v, want only %s", i, s.Holders, want)
		}
	}
	page := get(t, srv.URL+"/?backend=1")
	for _, want := range []string{`<a href="?backend=0" data-backend="0">mem://console-deck-a</a>`,
		`<a href="?backend=1" data-backend="1" aria-current="page">mem://console-deck-b</a>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the second tab's page lacks %q", want)
		}
	}
	if !regexp.MustCompile(`const backend = \s*1\s*;`).MatchString(page) {
		t.Errorf("the second tab's page does not follow backend 1")
	}
	for _, bad := range []string{"2", "-1", "x"} {
		resp, err := http.Get(srv.URL + "/events?backend=" + bad)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("/events?backend=%s = %d, want 404", bad, resp.StatusCode)
		}
	}

	unlock := func(backend int, name string) int {
		req, _ := http.NewRequestWithContext(ctx, "POST", fmt.Sprintf("%s/unlock?backend=%d", srv.URL, backend), strings.NewReader(`{"name":"`+name+`"}`))
		req.Header.Set("X-Padlock-CSRF", d.csrf)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := unlock(0, "web/on-b"); code != http.StatusNotFound {
		t.Errorf("force-unlock of web/on-b on the first backend = %d, want 404 (it is held on the second)", code)
	}
	if code := unlock(1, "web/on-b"); code != http.StatusOK {
		t.Errorf("force-unlock of web/on-b on the second backend = %d, want 200", code)
	}
	select {
	case <-lb.Done():
	case <-ctx.Done():
		t.Fatal("the force-unlocked hold's Done never closed")
	}

	if h := get(t, srv.URL+"/healthz"); h != "mem://console-deck-a: ok\nmem://console-deck-b: ok\n" {
		t.Errorf("/healthz = %q, want a line per backend", h)
	}
	m := get(t, srv.URL+"/metrics")
	for _, u := range urls {
		if !strings.Contains(m, `padlock_backend="`+u+`"`) {
			t.Errorf("/metrics has no instrument of backend %s:\n%.800s", u, m)
		}
	}

	for _, bad := range [][]string{{urls[0], urls[0]}, nil, {""}} {
		if d, err := newDeck(ctx, bad, "", time.Second, false); err == nil {
			d.close()
			t.Errorf("newDeck(%q) opened", bad)
		} else if !errors.As(err, new(usageError)) {
			t.Errorf("newDeck(%q): %v, want a usage error", bad, err)
		}
	}
}

// The contention chart's waiters: a name's waiters count once whatever the
// number of its holds, a backend that cannot count them adds none, looks
// within a second share a point (the most each found), and points older
// than the timeline's window go.
func TestConsoleLoadPoints(t *testing.T) {
	c := &console{}
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	readers := []padlock.Holder{{Name: "a", Waiters: 2}, {Name: "a", Waiters: 2}, {Name: "b", Waiters: 0}, {Name: "c", Waiters: -1}}
	c.addLoad(t0, readers)
	if got, want := c.load, []loadPoint{{At: t0, Holds: 4, Waiters: 2, Contended: 1}}; !slices.Equal(got, want) {
		t.Fatalf("one look: %+v, want %+v", got, want)
	}
	c.addLoad(t0.Add(500*time.Millisecond), []padlock.Holder{{Name: "a", Waiters: 3}, {Name: "d", Waiters: 1}})
	if got, want := c.load, []loadPoint{{At: t0, Holds: 4, Waiters: 4, Contended: 2}}; !slices.Equal(got, want) {
		t.Fatalf("a second look within the second: %+v, want %+v", got, want)
	}
	c.addLoad(t0.Add(time.Second), nil)
	if len(c.load) != 2 || c.load[1].Waiters != 0 {
		t.Fatalf("a look a second later: %+v, want a point of its own with no waiters", c.load)
	}
	c.addLoad(t0.Add(spanWindow+1500*time.Millisecond), nil)
	if len(c.load) != 1 || !c.load[0].At.Equal(t0.Add(spanWindow+1500*time.Millisecond)) {
		t.Fatalf("a look past the window: %+v, want only its own point", c.load)
	}
	for i := range 1000 {
		c.addLoad(t0.Add(spanWindow+time.Duration(i+2)*time.Second), nil)
	}
	if max := int(spanWindow/time.Second) + 1; len(c.load) > max {
		t.Fatalf("%d points kept after 1,000 looks a second apart, want at most %d (the window's seconds)", len(c.load), max)
	}
}

// On etcd, and on PostgreSQL in lease mode (logical decoding), which push
// changes (Locker.WatchHolders), the console reads the holders as they
// change, not only at its interval: with an interval of an hour, a hold,
// its release, a waiter (where the backend records waiters) and its grant
// still reach the page, and the page says that changes are pushed. On
// mem://, which cannot push, the page says how often it reads.
func TestConsoleFollowsPushedChanges(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pg := padlocktest.Start(t, padlocktest.Postgres)
	for _, c := range []struct {
		name, url string
		waiters   bool // Holder.Waiters counts the waiters
	}{
		{"etcd", startEtcd(t, ctx), true},
		{"postgres", pg.URL() + "&table=console_follows", false},
	} {
		t.Run(c.name, func(t *testing.T) { followsPushed(t, ctx, c.url, c.waiters) })
	}
	sctx, stopStream := context.WithCancel(ctx)
	defer stopStream()
	_, msrv := serveConsoleEvery(t, ctx, "mem://console-polls", time.Second, false)
	first := nextSnapshot(t, ctx, stream(t, sctx, msrv.URL+"/events"))("the mem:// console's first look", func(snapshot) bool { return true })
	if first.Follows || first.IntervalMs != 1000 {
		t.Errorf("mem:// console: follows %v, interval %dms; want a poll every 1000ms", first.Follows, first.IntervalMs)
	}
}

// followsPushed runs a console with an interval of an hour on url and
// sees a hold, its waiter (if waiters), the hand-off and the release.
func followsPushed(t *testing.T, ctx context.Context, url string, waiters bool) {
	_, srv := serveConsoleEvery(t, ctx, url, time.Hour, false)
	sctx, stopStream := context.WithCancel(ctx)
	defer stopStream()
	// A snapshot that does not come fails the test when ctx ends, long
	// before the interval (an hour) could bring it.
	next := nextSnapshot(t, ctx, stream(t, sctx, srv.URL+"/events"))
	ended := func(s snapshot, name, what string, token uint64) bool {
		return slices.ContainsFunc(s.History, func(e event) bool { return e.Name == name && e.Event == what && e.Token == token })
	}
	first := next("the first look", func(s snapshot) bool { return true })
	if !first.Follows {
		t.Fatalf("the console on %s does not follow pushed changes: %+v", url, first)
	}
	a, b := openT(t, ctx, url), openT(t, ctx, url)
	lk, err := a.Lock(ctx, "web/short")
	if err != nil {
		t.Fatal(err)
	}
	next("the hold", func(s snapshot) bool {
		return len(s.Holders) == 1 && s.Holders[0].Token == lk.Token()
	})
	// A waiter shows, and its grant is a hand-off.
	res := make(chan *padlock.Lock, 1)
	go func() {
		lk2, err := b.Lock(ctx, "web/short")
		if err != nil {
			t.Error(err)
		}
		res <- lk2
	}()
	if waiters {
		next("the waiter", func(s snapshot) bool { return len(s.Holders) == 1 && s.Holders[0].Waiters == 1 })
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lk2 := <-res
	if lk2 == nil {
		t.FailNow()
	}
	if waiters {
		next("the hand-off", func(s snapshot) bool { return ended(s, "web/short", "handed off", lk2.Token()) })
	} else {
		// Release and grant are two commits: a look between them sees
		// a release, then an acquisition, not a hand-off.
		next("the next hold", func(s snapshot) bool { return len(s.Holders) == 1 && s.Holders[0].Token == lk2.Token() })
	}
	if err := lk2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	next("the release", func(s snapshot) bool {
		return len(s.Holders) == 0 && ended(s, "web/short", "released", lk2.Token())
	})
}
