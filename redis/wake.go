package redis

import (
	"context"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// waker multiplexes every wait of one client over ONE pub/sub connection:
// it subscribes to a name's wake-up channel while anyone waits for that
// name, and fans each message out to the waiters. A lost message costs a
// waiter no more than its fallback timer.
//
// One goroutine (run) owns all the state and serialises everything that
// touches it: subscribe and unsubscribe requests, the server's
// acknowledgements and the messages, in the order they happen. go-redis
// reads the connection, reconnects it and resubscribes every channel after
// a break; a second acknowledgement of a channel therefore means the
// connection broke, messages may have been lost, and every waiter of that
// channel is told to try again.
type waker struct {
	ps    *goredis.PubSub
	start sync.Once        // run and the connection start with the first wait
	reqs  chan wakeRequest // from waiters to run
	done  chan struct{}    // closed by close
	exit  chan struct{}    // closed when run returns
}

// wakeSub is one waiter's subscription: it receives the payload of each
// wake-up: the id of the waiter that should try next, or "" for everyone.
type wakeSub struct {
	name string
	c    chan string
}

type wakeRequest struct {
	sub       *wakeSub
	subscribe bool
	reply     chan wakeReply // subscribe only
}

type wakeReply struct {
	confirmed <-chan struct{} // closed when the server acknowledged SUBSCRIBE
	err       error
}

// wakeChannel is run's state for one channel.
type wakeChannel struct {
	waiters   map[*wakeSub]struct{}
	sent      bool          // SUBSCRIBE sent and not yet acknowledged
	confirmed chan struct{} // closed at the first acknowledgement
}

func newWaker(c goredis.UniversalClient) *waker {
	return &waker{ps: c.Subscribe(context.Background()),
		reqs: make(chan wakeRequest), done: make(chan struct{}), exit: make(chan struct{})}
}

// subscribe registers a waiter on channel and returns once the server has
// acknowledged the subscription, so that no release after it is missed.
// Wake-ups go to c, which must have a buffer of one; several subscriptions
// (one per RedLock master) may share it.
func (w *waker) subscribe(ctx context.Context, channel string, c chan string) (*wakeSub, error) {
	s := &wakeSub{name: channel, c: c}
	w.start.Do(func() {
		select {
		case <-w.done:
		default:
			go w.run(w.ps.ChannelWithSubscriptions(goredis.WithChannelSize(256)))
		}
	})
	// The owner goroutine may be held up by go-redis (a reconnect holds
	// the pub/sub connection's lock): bound the wait whatever ctx says.
	rctx, cancel := driverkit.WithRequestTimeout(ctx, 0)
	defer cancel()
	reply := make(chan wakeReply, 1)
	select {
	case w.reqs <- wakeRequest{sub: s, subscribe: true, reply: reply}:
	case <-w.done:
		return nil, backends.ErrClosed
	case <-rctx.Done():
		return nil, driverkit.RequestError(ctx, "redis subscribe", context.Cause(rctx))
	}
	var r wakeReply
	select {
	case r = <-reply:
	case <-rctx.Done():
		go w.unsubscribe(s) // queued behind the subscribe it undoes
		return nil, driverkit.RequestError(ctx, "redis subscribe", context.Cause(rctx))
	}
	if r.err != nil {
		w.unsubscribe(s)
		return nil, requestError(ctx, "redis subscribe", r.err)
	}
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-r.confirmed:
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

// unsubscribe removes a waiter; the channel is unsubscribed when its last
// waiter leaves.
func (w *waker) unsubscribe(s *wakeSub) {
	select {
	case w.reqs <- wakeRequest{sub: s}:
	case <-w.done:
	}
}

// run owns the channels until close.
func (w *waker) run(in <-chan any) {
	defer close(w.exit)
	chans := map[string]*wakeChannel{}
	for {
		select {
		case <-w.done:
			return
		case r := <-w.reqs:
			if r.subscribe {
				r.reply <- w.add(chans, r.sub)
			} else {
				w.remove(chans, r.sub)
			}
		case m, ok := <-in:
			if !ok {
				return // closed
			}
			switch m := m.(type) {
			case *goredis.Subscription:
				if m.Kind == "subscribe" {
					w.acknowledged(chans, m.Channel)
				}
			case *goredis.Message:
				if ch := chans[m.Channel]; ch != nil {
					for s := range ch.waiters {
						notify(s.c, m.Payload)
					}
				}
			}
		}
	}
}

func (w *waker) add(chans map[string]*wakeChannel, s *wakeSub) wakeReply {
	ch := chans[s.name]
	if ch == nil {
		ch = &wakeChannel{waiters: map[*wakeSub]struct{}{}, confirmed: make(chan struct{})}
		chans[s.name] = ch
	}
	ch.waiters[s] = struct{}{}
	if !ch.sent && !isClosed(ch.confirmed) {
		ch.sent = true
		// A write to the connection, not a round trip: the acknowledgement
		// comes back through w.in.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := w.ps.Subscribe(ctx, s.name); err != nil {
			// go-redis keeps the channel and subscribes again when it
			// reconnects; the acknowledgement then confirms it.
			return wakeReply{err: err}
		}
	}
	return wakeReply{confirmed: ch.confirmed}
}

func (w *waker) remove(chans map[string]*wakeChannel, s *wakeSub) {
	ch := chans[s.name]
	if ch == nil {
		return
	}
	delete(ch.waiters, s)
	w.dropIfIdle(chans, s.name, ch)
}

// acknowledged handles the server's SUBSCRIBE acknowledgement: the first
// confirms the subscription; a later one follows a reconnect, after which
// every waiter must try again.
func (w *waker) acknowledged(chans map[string]*wakeChannel, name string) {
	ch := chans[name]
	if ch == nil {
		return
	}
	if ch.sent {
		ch.sent = false
		if !isClosed(ch.confirmed) {
			close(ch.confirmed)
		}
	} else {
		for s := range ch.waiters {
			notify(s.c, "")
		}
	}
	w.dropIfIdle(chans, name, ch)
}

// dropIfIdle unsubscribes a channel nobody waits on, but only once its
// SUBSCRIBE is acknowledged: a late acknowledgement can then never be
// taken for a newer subscription's.
func (w *waker) dropIfIdle(chans map[string]*wakeChannel, name string, ch *wakeChannel) {
	if len(ch.waiters) > 0 || ch.sent {
		return
	}
	delete(chans, name)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = w.ps.Unsubscribe(ctx, name) // best effort: a failure leaves an idle channel
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
	w.start.Do(func() { close(w.exit) }) // never started: nothing to wait for
	err := w.ps.Close()
	<-w.exit
	return err
}
