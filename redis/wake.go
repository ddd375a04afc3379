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
// name (and for linger after, so that a client that waits again soon, as
// under contention, finds it subscribed), and hands each message to the
// waiters it names. A lost message costs a waiter no more than its
// fallback timer.
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

	// run's own: a timer that drops channels idle for linger.
	idle      *time.Timer
	idleArmed bool
}

// linger is how long a channel stays subscribed after its last waiter
// left.
const linger = 2 * time.Second

// recentKept is how many of a channel's latest messages it keeps, for a
// waiter that joins after the try that made it one (subscribeAs).
const recentKept = 8

// wakeSub is one waiter's subscription: it receives the payload of each
// wake-up meant for it: "" (everyone tries), its id, "<its id> <token>"
// (a fair grant), or, with no id, every message.
type wakeSub struct {
	w     *waker
	name  string
	c     chan string
	id    string
	since time.Time // deliver the kept messages received since then
}

// wants reports whether the waiter takes payload.
func (s *wakeSub) wants(payload string) bool {
	id := s.id
	return id == "" || payload == "" || payload == id ||
		len(payload) > len(id) && payload[len(id)] == ' ' && payload[:len(id)] == id
}

type wakeRequest struct {
	sub       *wakeSub
	subscribe bool
	reply     chan wakeReply // subscribe only
}

type wakeReply struct {
	confirmed <-chan struct{} // closed when the server acknowledged SUBSCRIBE
	live      bool            // acknowledged before sub.since, and no message since lost
	err       error
}

// wakeMessage is a message as run received it.
type wakeMessage struct {
	payload string
	at      time.Time
}

// wakeChannel is run's state for one channel.
type wakeChannel struct {
	waiters   map[*wakeSub]struct{}
	sent      bool          // SUBSCRIBE sent and not yet acknowledged
	confirmed chan struct{} // closed at the first acknowledgement
	ackAt     time.Time     // the latest acknowledgement (a reconnect's too)
	recent    []wakeMessage // the latest messages, oldest first, at most recentKept
	idleAt    time.Time     // when its last waiter left (zero while it has any)
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
	s, _, err := w.subscribeAs(ctx, channel, c, "", time.Time{})
	return s, err
}

// subscribeAs is subscribe for a waiter that takes only the messages that
// name id (or everyone). With since set (when the try that made the
// caller a waiter was sent), it reports live when this client's
// subscription was acknowledged before since and has not broken since,
// and hands the caller the messages received after since: every wake-up
// that try could have led to has then reached the caller, which need not
// try again. (A message no longer kept wakes it, as "".)
func (w *waker) subscribeAs(ctx context.Context, channel string, c chan string, id string, since time.Time) (*wakeSub, bool, error) {
	s := &wakeSub{w: w, name: channel, c: c, id: id, since: since}
	live, err := w.join(ctx, s)
	if err != nil {
		return nil, false, err
	}
	return s, live, nil
}

// join adds s to its channel and waits for the acknowledgement.
func (w *waker) join(ctx context.Context, s *wakeSub) (bool, error) {
	w.start.Do(func() {
		select {
		case <-w.done:
		default:
			w.idle = time.NewTimer(linger)
			w.idle.Stop()
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
		return false, backends.ErrClosed
	case <-rctx.Done():
		return false, driverkit.RequestError(ctx, "redis subscribe", context.Cause(rctx))
	}
	var r wakeReply
	select {
	case r = <-reply:
	case <-rctx.Done():
		go w.unsubscribe(s) // queued behind the subscribe it undoes
		return false, driverkit.RequestError(ctx, "redis subscribe", context.Cause(rctx))
	}
	if r.err != nil {
		w.unsubscribe(s)
		return false, requestError(ctx, "redis subscribe", r.err)
	}
	if r.live {
		return true, nil
	}
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-r.confirmed:
		return false, nil
	case <-ctx.Done():
		w.unsubscribe(s)
		return false, ctx.Err()
	case <-t.C:
		// No acknowledgement yet (a reconnect in progress?): go on; the
		// waiter's fallback timer covers a missed wake-up.
		return false, nil
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
	defer w.idle.Stop()
	chans := map[string]*wakeChannel{}
	for {
		select {
		case <-w.done:
			return
		case <-w.idle.C:
			w.idleArmed = false
			w.dropIdle(chans)
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
					ch.keep(m.Payload)
					for s := range ch.waiters {
						if s.wants(m.Payload) {
							notify(s.c, m.Payload)
						}
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
	ch.idleAt = time.Time{}
	if !s.since.IsZero() && !ch.sent && isClosed(ch.confirmed) && ch.ackAt.Before(s.since) {
		// Subscribed since before the caller's try: hand it what came
		// after that try.
		if len(ch.recent) == recentKept && !ch.recent[0].at.Before(s.since) {
			notify(s.c, "") // some may have been dropped
		}
		for _, m := range ch.recent {
			if !m.at.Before(s.since) && s.wants(m.payload) {
				notify(s.c, m.payload)
			}
		}
		return wakeReply{confirmed: ch.confirmed, live: true}
	}
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
	ch.ackAt = time.Now()
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

// keep records a message for waiters that join after it (add).
func (ch *wakeChannel) keep(payload string) {
	if len(ch.recent) == recentKept {
		copy(ch.recent, ch.recent[1:])
		ch.recent = ch.recent[:recentKept-1]
	}
	ch.recent = append(ch.recent, wakeMessage{payload: payload, at: time.Now()})
}

// dropIfIdle marks a channel nobody waits on idle, to be unsubscribed
// after linger (dropIdle), but only once its SUBSCRIBE is acknowledged:
// a late acknowledgement can then never be taken for a newer
// subscription's.
func (w *waker) dropIfIdle(chans map[string]*wakeChannel, name string, ch *wakeChannel) {
	if len(ch.waiters) > 0 || ch.sent || !ch.idleAt.IsZero() {
		return
	}
	ch.idleAt = time.Now()
	if !w.idleArmed {
		w.idleArmed = true
		w.idle.Reset(linger)
	}
}

// dropIdle unsubscribes the channels idle for linger, and sets the timer
// for the next to be.
func (w *waker) dropIdle(chans map[string]*wakeChannel) {
	now := time.Now()
	var next time.Duration
	for name, ch := range chans {
		if ch.idleAt.IsZero() || len(ch.waiters) > 0 || ch.sent {
			continue
		}
		if left := linger - now.Sub(ch.idleAt); left > 0 {
			if next == 0 || left < next {
				next = left
			}
			continue
		}
		delete(chans, name)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = w.ps.Unsubscribe(ctx, name) // best effort: a failure leaves an idle channel
		cancel()
	}
	if next > 0 {
		w.idleArmed = true
		w.idle.Reset(next)
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
	w.start.Do(func() { close(w.exit) }) // never started: nothing to wait for
	err := w.ps.Close()
	<-w.exit
	return err
}
