package redis

import (
	"context"
	"errors"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock/backends"
)

// waker multiplexes every wait of one client over ONE pub/sub connection:
// it subscribes to a name's wake-up channel while anyone waits for that
// name, and fans each message out to the waiters. A lost message costs a
// waiter no more than its fallback timer.
type waker struct {
	ps   *goredis.PubSub
	done chan struct{}
	wg   sync.WaitGroup

	// ops serializes SUBSCRIBE and UNSUBSCRIBE so the server sees them in
	// the order the map changes; mu guards the map and is never held
	// across network I/O, so delivery never waits for a slow command.
	ops     sync.Mutex
	mu      sync.Mutex
	chans   map[string]*wakeChannel
	started bool
}

type wakeChannel struct {
	refs      int
	pending   int           // SUBSCRIBEs sent (or resent on reconnect) and not yet acknowledged
	confirmed chan struct{} // closed when the server acknowledged SUBSCRIBE
	stale     bool          // the connection broke since the acknowledgement
	waiters   map[*wakeSub]struct{}
}

// wakeSub is one waiter's subscription: it receives the payload of each
// wake-up: the id of the waiter that should try next, or "" for everyone.
type wakeSub struct {
	name string
	c    chan string
}

func newWaker(c goredis.UniversalClient) *waker {
	return &waker{ps: c.Subscribe(context.Background()), done: make(chan struct{}),
		chans: map[string]*wakeChannel{}}
}

// subscribe registers a waiter on channel and returns once the server has
// acknowledged the subscription, so that no release after it is missed.
// Wake-ups go to c, which must have a buffer of one; several subscriptions
// (one per RedLock master) may share it.
func (w *waker) subscribe(ctx context.Context, channel string, c chan string) (*wakeSub, error) {
	s := &wakeSub{name: channel, c: c}
	w.ops.Lock()
	w.mu.Lock()
	ch := w.chans[channel]
	if ch == nil {
		ch = &wakeChannel{confirmed: make(chan struct{}), waiters: map[*wakeSub]struct{}{}}
		w.chans[channel] = ch
	}
	// Send SUBSCRIBE unless one is acknowledged or on its way (a failed
	// one is sent again by the next subscriber).
	send := ch.pending == 0 && !isClosed(ch.confirmed)
	if send {
		ch.pending++
	}
	ch.refs++
	ch.waiters[s] = struct{}{}
	if !w.started {
		w.started = true
		w.wg.Add(1)
		go w.loop()
	}
	w.mu.Unlock()
	var err error
	if send {
		err = w.ps.Subscribe(ctx, channel)
		if err != nil {
			w.mu.Lock()
			ch.pending--
			w.mu.Unlock()
		}
	}
	w.ops.Unlock()
	if err != nil {
		w.unsubscribe(s)
		return nil, backends.RequestError(ctx, "redis subscribe", err)
	}
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-ch.confirmed:
		return s, nil
	case <-ctx.Done():
		w.unsubscribe(s)
		return nil, ctx.Err()
	case <-t.C:
		// No acknowledgement yet (a reconnect in progress?): go on; the
		// waiter's fallback timer covers a missed wake-up.
		return s, nil
	}
}

// unsubscribe removes a waiter. The channel is unsubscribed when its last
// waiter leaves, but only once no SUBSCRIBE for it awaits acknowledgement:
// a late acknowledgement can then never be mistaken for a newer
// subscription's.
func (w *waker) unsubscribe(s *wakeSub) {
	w.ops.Lock()
	defer w.ops.Unlock()
	w.mu.Lock()
	ch := w.chans[s.name]
	if ch == nil {
		w.mu.Unlock()
		return
	}
	delete(ch.waiters, s)
	ch.refs--
	drop := ch.refs == 0 && ch.pending == 0
	if drop {
		delete(w.chans, s.name)
	}
	w.mu.Unlock()
	if drop {
		w.sendUnsubscribe(s.name)
	}
}

// sendUnsubscribe is best effort: a failure only leaves an idle channel.
// w.ops must be held.
func (w *waker) sendUnsubscribe(channel string) {
	select {
	case <-w.done:
	default:
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = w.ps.Unsubscribe(ctx, channel)
		cancel()
	}
}

// loop reads the pub/sub connection until close.
func (w *waker) loop() {
	defer w.wg.Done()
	retry := backends.ExponentialBackoff(20*time.Millisecond, time.Second)
	failures := 0
	for {
		msg, err := w.ps.ReceiveTimeout(context.Background(), 2*time.Second)
		select {
		case <-w.done:
			return
		default:
		}
		if err != nil {
			var nerr interface{ Timeout() bool }
			if errors.As(err, &nerr) && nerr.Timeout() {
				// Quiet connection: ping it so a dead one is noticed.
				_ = w.ps.Ping(context.Background())
				continue
			}
			// The connection broke: messages may be lost. go-redis
			// resubscribes on the next receive; each channel's waiters try
			// again now and once more when its resubscription is confirmed.
			w.broken()
			failures++
			t := time.NewTimer(retry.NextBackoff(failures))
			select {
			case <-w.done:
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		failures = 0
		switch m := msg.(type) {
		case *goredis.Subscription:
			if m.Kind == "subscribe" {
				w.confirm(m.Channel)
			}
		case *goredis.Message:
			w.deliver(m.Channel, m.Payload)
		}
	}
}

func (w *waker) confirm(channel string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := w.chans[channel]
	if ch == nil {
		return
	}
	if ch.pending > 0 {
		ch.pending--
	}
	if !isClosed(ch.confirmed) {
		close(ch.confirmed)
	}
	if ch.stale {
		ch.stale = false
		for s := range ch.waiters {
			notify(s.c, "")
		}
	}
	if ch.refs == 0 && ch.pending == 0 {
		// Every waiter left before the acknowledgement. Unsubscribe off the
		// reader goroutine, so that delivery never waits for a command.
		delete(w.chans, channel)
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.ops.Lock()
			defer w.ops.Unlock()
			w.mu.Lock()
			resubscribed := w.chans[channel] != nil
			w.mu.Unlock()
			if !resubscribed {
				w.sendUnsubscribe(channel)
			}
		}()
	}
}

func (w *waker) deliver(channel, payload string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch := w.chans[channel]; ch != nil {
		for s := range ch.waiters {
			notify(s.c, payload)
		}
	}
}

// broken wakes every waiter and marks every channel for a second wake-up
// when its resubscription is acknowledged.
func (w *waker) broken() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ch := range w.chans {
		ch.stale = true
		ch.pending = 1 // go-redis resends SUBSCRIBE once on the new connection
		for s := range ch.waiters {
			notify(s.c, "")
		}
	}
}

// notify hands payload to a waiter without blocking. If a wake-up is already
// pending, the two merge into "" (try again), so none is ever lost.
func notify(c chan string, payload string) {
	select {
	case c <- payload:
		return
	default:
	}
	select {
	case <-c:
	default:
	}
	select {
	case c <- "":
	default:
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func (w *waker) close() error {
	close(w.done)
	err := w.ps.Close()
	w.wg.Wait()
	return err
}
