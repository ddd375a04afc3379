package faults

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/padlock-go/padlock"
	_ "github.com/padlock-go/padlock/all"
	"github.com/padlock-go/padlock/fence"
)

// workerConfig is one worker's part in a run.
type workerConfig struct {
	Client   int
	URL      string        // the lock server, through this worker's proxy
	Resource string        // the resource's address, through this worker's proxy
	Name     string        // the lock name every worker contends for (multi: the comma-separated names)
	Kind     Kind          // what it takes and does inside (see Kind)
	Limit    int           // permits: the semaphore's limit
	Term     time.Duration // leaders: the longest term, after which it resigns
	TTL      time.Duration // each hold's TTL
	Wait     time.Duration // how long one Lock waits
	Hold     time.Duration // the sleep between read and write, inside the lock
	Think    time.Duration // the pause between a release and the next Lock
	// WriteTimeout, if set, bounds the write to the resource: a worker
	// gives up on a write it has sent (it may still land), releases, and
	// exits, as a client that timed out and went away: it cannot then
	// take the lock again and hold up the others behind its slow link.
	WriteTimeout time.Duration
}

func (c *workerConfig) flags(fs *flag.FlagSet) {
	fs.IntVar(&c.Client, "client", 0, "client number")
	fs.StringVar(&c.URL, "url", "", "lock server URL")
	fs.StringVar(&c.Resource, "resource", "", "resource address")
	fs.StringVar(&c.Name, "name", "faults", "lock name (multi: comma-separated names)")
	fs.Func("kind", "worker kind: writer, reader, permit, multi or leader (default writer)", func(s string) error {
		switch k := Kind(s); k {
		case Writer, Reader, Permit, Multi, Leader:
			c.Kind = k
			return nil
		}
		return fmt.Errorf("%w: worker kind %q (want writer, reader, permit, multi or leader)", ErrInvalid, s)
	})
	fs.IntVar(&c.Limit, "limit", 1, "permits: the semaphore's limit")
	fs.DurationVar(&c.Term, "term", time.Second, "leaders: the longest term, after which it resigns")
	fs.DurationVar(&c.TTL, "ttl", 2*time.Second, "hold TTL")
	fs.DurationVar(&c.Wait, "wait", 10*time.Second, "longest wait of one Lock")
	fs.DurationVar(&c.Hold, "hold", 100*time.Millisecond, "sleep inside the lock, between read and write")
	fs.DurationVar(&c.Think, "think", 10*time.Millisecond, "pause between a release and the next Lock")
	fs.DurationVar(&c.WriteTimeout, "write-timeout", 0, "how long a write to the resource may take (0: no bound)")
}

func (c *workerConfig) args() []string {
	kind := c.Kind
	if kind == "" {
		kind = Writer
	}
	return []string{"-client", strconv.Itoa(c.Client), "-url", c.URL, "-resource", c.Resource, "-name", c.Name,
		"-kind", string(kind), "-limit", strconv.Itoa(max(c.Limit, 1)), "-term", c.Term.String(),
		"-ttl", c.TTL.String(), "-wait", c.Wait.String(), "-hold", c.Hold.String(), "-think", c.Think.String(),
		"-write-timeout", c.WriteTimeout.String()}
}

// runWorker is a lock client: until ctx ends, it takes the lock (as its
// Kind says: see acquire), reads the resource, sleeps, writes the value
// read plus one with its token (readers and permits check their token
// instead), and releases, logging each step as an event on out; a leader
// does this again and again while its term lasts. It acts on nothing but
// its own view: a holder that lost its lock without noticing writes
// anyway, as a paused process does when it wakes.
func runWorker(ctx context.Context, c workerConfig, out io.Writer) error {
	em := newEmitter(out)
	l, err := padlock.Open(ctx, c.URL)
	if err != nil {
		return fmt.Errorf("open %s: %w", padlock.RedactURL(c.URL), err)
	}
	var watchers sync.WaitGroup
	defer watchers.Wait() // after Close, which ends every hold's Done
	defer l.Close()
	pctx, stopProbe := context.WithCancel(ctx)
	defer stopProbe()
	watchers.Go(func() { stallProbe(pctx, em, c.Client) })
	// Longer than a held read (see resource.arm).
	hc := &http.Client{Timeout: holdBound + time.Minute}
	names := parseNames(c.Name)
	ev := func(op, phase, name string, token uint64) Event {
		return Event{Client: c.Client, Op: op, Phase: phase, Kind: c.kind(), Name: name, Token: token}
	}
	for ctx.Err() == nil {
		for _, n := range names {
			em.emit(ev(OpAcquire, Invoke, n, 0))
		}
		h, err := c.acquire(ctx, l, names)
		if err != nil {
			t := now()
			for _, n := range names {
				e := ev(OpAcquire, outcome(err), n, 0)
				e.T, e.Err = t, err.Error()
				em.emit(e)
			}
			sleep(ctx, c.Think+10*time.Millisecond)
			continue
		}
		t := now()
		for i, lk := range h.locks {
			e := ev(OpAcquire, OK, names[i], lk.token)
			e.T = t
			em.emit(e)
			watchers.Go(func() {
				<-lk.done
				if err := lk.err(); err != nil {
					e := ev(OpLost, OK, names[i], lk.token)
					e.Err = err.Error()
					em.emit(e)
				}
			})
		}
		gaveUp := c.critical(ctx, hc, em, names, h)
		if !gaveUp && c.kind() == Leader {
			gaveUp = c.term(ctx, hc, em, names, h)
		}
		for i, lk := range h.locks {
			em.emit(ev(OpRelease, Invoke, names[i], lk.token))
			err = lk.unlock(context.WithoutCancel(ctx))
			e := ev(OpRelease, OK, names[i], lk.token)
			if err != nil {
				e.Phase, e.Err = outcome(err), err.Error()
			}
			em.emit(e)
		}
		if gaveUp {
			return nil
		}
		sleep(ctx, c.Think)
	}
	return nil
}

// term is a leader's term after its first critical section: it goes on
// reading and writing until its Done closes, Term has passed since it was
// elected, or ctx ends; it reports whether it gave up on a write.
func (c *workerConfig) term(ctx context.Context, hc *http.Client, em *emitter, names []string, h *held) (gaveUp bool) {
	for begin := time.Now(); time.Since(begin) < c.Term && ctx.Err() == nil && !closed(h.locks[0].done); {
		sleep(ctx, c.Think)
		if c.critical(ctx, hc, em, names, h) {
			return true
		}
	}
	return false
}

// closed reports whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// kind is c's kind, a writer by default.
func (c *workerConfig) kind() Kind {
	if c.Kind == "" {
		return Writer
	}
	return c.Kind
}

// held is what one acquisition took: a hold per name (two for a
// multi-lock), or a leader's term.
type held struct{ locks []heldLock }

type heldLock struct {
	lk     *padlock.Lock // nil for a leader's term
	fenced fence.Holder  // lk, or the leader's *padlock.Leadership
	token  uint64
	done   <-chan struct{}
	err    func() error
	unlock func(context.Context) error
}

func lockHeld(lk *padlock.Lock) heldLock {
	return heldLock{lk: lk, fenced: lk, token: lk.Token(), done: lk.Done(), err: lk.Err, unlock: lk.Unlock}
}

// acquire takes what c's kind takes: Lock, RLock, Lock WithLimit, LockAll
// or Campaign.
func (c *workerConfig) acquire(ctx context.Context, l *padlock.Locker, names []string) (*held, error) {
	opts := []padlock.Option{padlock.WithTTL(c.TTL), padlock.WithWait(c.Wait)}
	var lk *padlock.Lock
	var err error
	switch c.kind() {
	case Reader:
		lk, err = l.RLock(ctx, names[0], opts...)
	case Permit:
		lk, err = l.Lock(ctx, names[0], append(opts, padlock.WithLimit(c.Limit))...)
	case Multi:
		lks, err := l.LockAll(ctx, names, opts...)
		if err != nil {
			return nil, err
		}
		h := &held{}
		for _, lk := range lks {
			h.locks = append(h.locks, lockHeld(lk))
		}
		return h, nil
	case Leader:
		ld, err := l.Election(names[0]).Campaign(ctx, fmt.Sprintf("client-%d", c.Client), opts...)
		if err != nil {
			return nil, err
		}
		return &held{locks: []heldLock{{fenced: ld, token: ld.Token(), done: ld.Done(), err: ld.Err, unlock: ld.Resign}}}, nil
	default:
		lk, err = l.Lock(ctx, names[0], opts...)
	}
	if err != nil {
		return nil, err
	}
	return &held{locks: []heldLock{lockHeld(lk)}}, nil
}

// critical is the work inside the lock: read every name's registers,
// sleep, write each plus one (readers and permits: check their token). It
// reports whether it gave up on a write after WriteTimeout.
func (c *workerConfig) critical(ctx context.Context, hc *http.Client, em *emitter, names []string, h *held) (gaveUp bool) {
	ev := func(op, phase string, i int) Event {
		return Event{Client: c.Client, Op: op, Phase: phase, Token: h.locks[i].token, Kind: c.kind(), Name: names[i]}
	}
	q := func(i int) url.Values {
		return url.Values{"client": {strconv.Itoa(c.Client)}, "kind": {string(c.kind())}}
	}
	got := make([]readings, len(names))
	for i := range names {
		em.emit(ev(OpRead, Invoke, i))
		if err := c.call(ctx, hc, http.MethodGet, "/read", q(i), names[i], h.locks[i], &got[i]); err != nil {
			e := ev(OpRead, Fail, i)
			e.Err = err.Error()
			em.emit(e)
			return false
		}
		e := ev(OpRead, OK, i)
		e.Value = got[i].Unfenced
		em.emit(e)
	}
	sleep(ctx, c.Hold)
	wctx, cancel := context.WithoutCancel(ctx), context.CancelFunc(func() {})
	if c.WriteTimeout > 0 {
		wctx, cancel = context.WithTimeout(wctx, c.WriteTimeout)
	}
	defer cancel()
	for i := range names {
		op, path, v := OpWrite, "/write", q(i)
		if !c.kind().writes() {
			op, path = OpCheck, "/check"
		} else {
			v.Set("unfenced", fmt.Sprint(got[i].Unfenced+1))
			v.Set("fenced", fmt.Sprint(got[i].Fenced+1))
		}
		e := ev(op, Invoke, i)
		if op == OpWrite {
			e.Value = got[i].Unfenced + 1
		}
		em.emit(e)
		var res writeResult
		err := c.call(wctx, hc, http.MethodPost, path, v, names[i], h.locks[i], &res)
		e.Phase = OK
		if err != nil {
			e.Phase, e.Err = Info, err.Error() // it may have been applied
		} else {
			e.Accepted = boolp(res.FencedAccepted)
		}
		e.T = 0
		em.emit(e)
		if err != nil && c.WriteTimeout > 0 && errors.Is(wctx.Err(), context.DeadlineExceeded) {
			return true
		}
	}
	return false
}

// call makes one request to the resource about name, with hl's token in
// fence's headers, and decodes its JSON answer.
func (c *workerConfig) call(ctx context.Context, hc *http.Client, method, path string, q url.Values, name string, hl heldLock, into any) error {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+c.Resource+path+"?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	req.Header.Set(fence.ResourceHeader, name)
	if err := fence.SetHeader(req, hl.fenced); err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("resource %s: %s: %s", path, resp.Status, b)
	}
	return json.NewDecoder(resp.Body).Decode(into)
}

// outcome is the phase of an op that returned err: fail when it certainly
// did not happen, info when it may have (an outage mid-request).
func outcome(err error) string {
	switch {
	case errors.Is(err, padlock.ErrNotAcquired), errors.Is(err, padlock.ErrTimeout),
		errors.Is(err, context.Canceled), errors.Is(err, padlock.ErrNotHeld):
		return Fail
	}
	return Info
}

// sleep sleeps for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
