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
)

// workerConfig is one worker's part in a run.
type workerConfig struct {
	Client   int
	URL      string        // the lock server, through this worker's proxy
	Resource string        // the resource's address, through this worker's proxy
	Name     string        // the lock name every worker contends for
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
	fs.StringVar(&c.Name, "name", "faults", "lock name")
	fs.DurationVar(&c.TTL, "ttl", 2*time.Second, "hold TTL")
	fs.DurationVar(&c.Wait, "wait", 10*time.Second, "longest wait of one Lock")
	fs.DurationVar(&c.Hold, "hold", 100*time.Millisecond, "sleep inside the lock, between read and write")
	fs.DurationVar(&c.Think, "think", 10*time.Millisecond, "pause between a release and the next Lock")
	fs.DurationVar(&c.WriteTimeout, "write-timeout", 0, "how long a write to the resource may take (0: no bound)")
}

func (c *workerConfig) args() []string {
	return []string{"-client", strconv.Itoa(c.Client), "-url", c.URL, "-resource", c.Resource, "-name", c.Name,
		"-ttl", c.TTL.String(), "-wait", c.Wait.String(), "-hold", c.Hold.String(), "-think", c.Think.String(),
		"-write-timeout", c.WriteTimeout.String()}
}

// runWorker is a lock client: until ctx ends, it takes the lock, reads the
// resource, sleeps, writes the value read plus one with its token, and
// releases, logging each step as an event on out. It acts on nothing but
// its own view: a holder that lost its lock without noticing writes anyway,
// as a paused process does when it wakes.
func runWorker(ctx context.Context, c workerConfig, out io.Writer) error {
	em := newEmitter(out)
	l, err := padlock.Open(ctx, c.URL)
	if err != nil {
		return fmt.Errorf("open %s: %w", padlock.RedactURL(c.URL), err)
	}
	var watchers sync.WaitGroup
	defer watchers.Wait() // after Close, which ends every hold's Done
	defer l.Close()
	// Longer than a held read (see resource.arm).
	hc := &http.Client{Timeout: holdBound + time.Minute}
	ev := func(op, phase string) Event { return Event{Client: c.Client, Op: op, Phase: phase} }
	for ctx.Err() == nil {
		em.emit(ev(OpAcquire, Invoke))
		lk, err := l.Lock(ctx, c.Name, padlock.WithTTL(c.TTL), padlock.WithWait(c.Wait))
		if err != nil {
			e := ev(OpAcquire, outcome(err))
			e.Err = err.Error()
			em.emit(e)
			sleep(ctx, c.Think+10*time.Millisecond)
			continue
		}
		e := ev(OpAcquire, OK)
		e.Token = lk.Token()
		em.emit(e)
		watchers.Go(func() {
			<-lk.Done()
			if err := lk.Err(); err != nil {
				e := ev(OpLost, OK)
				e.Token, e.Err = lk.Token(), err.Error()
				em.emit(e)
			}
		})
		gaveUp := c.critical(ctx, hc, em, lk.Token())
		e = ev(OpRelease, Invoke)
		e.Token = lk.Token()
		em.emit(e)
		err = lk.Unlock(context.WithoutCancel(ctx))
		e = ev(OpRelease, OK)
		e.Token = lk.Token()
		if err != nil {
			e.Phase, e.Err = outcome(err), err.Error()
		}
		em.emit(e)
		if gaveUp {
			return nil
		}
		sleep(ctx, c.Think)
	}
	return nil
}

// critical is the work inside the lock: read both registers, sleep, write
// both plus one. It reports whether it gave up on its write after
// WriteTimeout.
func (c *workerConfig) critical(ctx context.Context, hc *http.Client, em *emitter, token uint64) (gaveUp bool) {
	ev := func(op, phase string) Event { return Event{Client: c.Client, Op: op, Phase: phase, Token: token} }
	em.emit(ev(OpRead, Invoke))
	var got readings
	err := c.call(ctx, hc, http.MethodGet, "/read", url.Values{"client": {strconv.Itoa(c.Client)}, "token": {fmt.Sprint(token)}}, &got)
	if err != nil {
		e := ev(OpRead, Fail)
		e.Err = err.Error()
		em.emit(e)
		return false
	}
	e := ev(OpRead, OK)
	e.Value = got.Unfenced
	em.emit(e)
	sleep(ctx, c.Hold)
	e = ev(OpWrite, Invoke)
	e.Value = got.Unfenced + 1
	em.emit(e)
	var res writeResult
	wctx, cancel := context.WithoutCancel(ctx), context.CancelFunc(func() {})
	if c.WriteTimeout > 0 {
		wctx, cancel = context.WithTimeout(wctx, c.WriteTimeout)
	}
	defer cancel()
	err = c.call(wctx, hc, http.MethodPost, "/write", url.Values{
		"client": {strconv.Itoa(c.Client)}, "token": {fmt.Sprint(token)},
		"unfenced": {fmt.Sprint(got.Unfenced + 1)}, "fenced": {fmt.Sprint(got.Fenced + 1)}}, &res)
	e = ev(OpWrite, OK)
	e.Value = got.Unfenced + 1
	if err != nil {
		e.Phase, e.Err = Info, err.Error() // it may have been applied
	} else {
		e.Accepted = boolp(res.FencedAccepted)
	}
	em.emit(e)
	return err != nil && c.WriteTimeout > 0 && errors.Is(wctx.Err(), context.DeadlineExceeded)
}

// call makes one request to the resource and decodes its JSON answer.
func (c *workerConfig) call(ctx context.Context, hc *http.Client, method, path string, q url.Values, into any) error {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+c.Resource+path+"?"+q.Encode(), nil)
	if err != nil {
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
