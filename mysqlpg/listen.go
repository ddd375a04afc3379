package mysqlpg

import (
	"context"
	"encoding/hex"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// listener is PostgreSQL's wake-up: one connection per Locker that LISTENs
// on the table's channel, started by the first wait that needs it and kept
// until Close. Releases NOTIFY the channel with the name's key; the
// listener wakes the waiters for that key. While the connection is down,
// waiters poll; when it is back, every waiter looks again, since a release
// may have gone unseen meanwhile.
type listener struct {
	cfg     *pgx.ConnConfig
	channel string
	dial    time.Duration
	log     *slog.Logger
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu      sync.Mutex
	started bool
	failing bool          // the last attempt to listen failed: do not wait for it
	upCh    chan struct{} // closed while the connection listens; replaced when it drops
	waiters map[string]map[*waiter]struct{}
}

// waiter is one acquisition waiting for its name's release.
type waiter struct {
	l   *listener
	key string
	c   chan struct{} // one wake-up at a time; never closed
	// released is the highest token whose release woke the waiter since
	// it last looked (releasedSince), under l.mu; a wake-up that names no
	// token counts as every token's.
	released uint64
}

func newListener(cfg *pgx.ConnConfig, channel string, dial time.Duration, log *slog.Logger) *listener {
	ctx, cancel := context.WithCancel(context.Background())
	return &listener{cfg: cfg, channel: channel, dial: dial, log: log, ctx: ctx, cancel: cancel,
		upCh: make(chan struct{}), waiters: map[string]map[*waiter]struct{}{}}
}

// watch registers a waiter for key and waits, within the request bound
// and ctx, for the listening connection to be up. A waiter registered
// while it is down polls until it is.
func (l *listener) watch(ctx context.Context, key []byte) *waiter {
	w := &waiter{l: l, key: hex.EncodeToString(key), c: make(chan struct{}, 1)}
	l.mu.Lock()
	if l.waiters[w.key] == nil {
		l.waiters[w.key] = map[*waiter]struct{}{}
	}
	l.waiters[w.key][w] = struct{}{}
	if !l.started && l.ctx.Err() == nil {
		l.started = true
		l.wg.Go(l.run)
	}
	up, failing := l.upCh, l.failing
	l.mu.Unlock()
	if failing {
		return w // it polls until the listener is back
	}
	t := time.NewTimer(l.dial)
	defer t.Stop()
	select {
	case <-up:
	case <-t.C:
	case <-ctx.Done():
	case <-l.ctx.Done():
	}
	return w
}

// listening reports whether a release would wake w now.
func (w *waiter) listening() bool {
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	select {
	case <-w.l.upCh:
		return true
	default:
		return false
	}
}

func (w *waiter) stop() {
	l := w.l
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.waiters[w.key], w)
	if len(l.waiters[w.key]) == 0 {
		delete(l.waiters, w.key)
	}
}

// releasedSince reports whether a release of token t or of a later
// holder woke w since the last call that reported true. A queue's head
// (queue_pg.go) waits for the holder it saw to release: earlier releases,
// whose wake-ups may still be buffered, do not count.
//
// With t 0 (a name whose row did not exist yet: any release will do), it
// still needs a release: before, it reported one at every call, and a
// head that saw no row tried again at once, round after round.
func (w *waiter) releasedSince(t uint64) bool {
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	if w.released == 0 || w.released < t {
		return false
	}
	w.released = 0
	return true
}

// wake wakes the waiters for a notification's payload: a name's key, the
// key and the token released ("key:token"), or "" for every waiter.
func (l *listener) wake(payload string) {
	key, tok, named := strings.Cut(payload, ":")
	token := uint64(math.MaxUint64)
	if named {
		if t, err := strconv.ParseUint(tok, 10, 64); err == nil {
			token = t
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, ws := range l.waiters {
		if key != "" && k != key {
			continue
		}
		for w := range ws {
			w.released = max(w.released, token)
			select {
			case w.c <- struct{}{}:
			default:
			}
		}
	}
}

// reconnectBackoff paces reconnections of the listening connection.
var reconnectBackoff = backends.ExponentialBackoff(50*time.Millisecond, 2*time.Second)

func (l *listener) run() {
	for attempt := 0; l.ctx.Err() == nil; attempt++ {
		if l.listen() {
			attempt = 0
		}
		t := time.NewTimer(reconnectBackoff.NextBackoff(attempt))
		select {
		case <-l.ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
}

// listen connects, LISTENs and delivers notifications until the
// connection fails or the listener closes. It reports whether it got as
// far as listening.
func (l *listener) listen() bool {
	ctx, cancel := context.WithTimeout(l.ctx, l.dial)
	conn, err := pgx.ConnectConfig(ctx, l.cfg)
	if err == nil {
		_, err = conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize())
	}
	cancel()
	if err != nil {
		if conn != nil {
			conn.Close(context.Background())
		}
		l.mu.Lock()
		l.failing = true
		l.mu.Unlock()
		if l.ctx.Err() == nil {
			l.log.Warn("padlock: postgres listener cannot listen; waiters poll meanwhile", "err", err)
		}
		return false
	}
	defer func() {
		l.mu.Lock()
		l.upCh = make(chan struct{})
		l.mu.Unlock()
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn.Close(cctx)
		cancel()
		l.wake("") // polling from now on
	}()
	l.mu.Lock()
	l.failing = false
	close(l.upCh)
	l.mu.Unlock()
	l.wake("") // a release may have gone unseen while down
	for {
		// A connection that went silent would never say so: every
		// listenCheck without a notification, it must answer a ping.
		wctx, cancel := context.WithTimeout(l.ctx, listenCheck)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if err != nil && l.ctx.Err() == nil && wctx.Err() != nil && !conn.IsClosed() {
			pctx, cancel := context.WithTimeout(l.ctx, l.dial)
			err = conn.Ping(pctx)
			cancel()
			if err == nil {
				continue
			}
		}
		if err != nil {
			if l.ctx.Err() == nil {
				l.log.Warn("padlock: postgres listener lost its connection; reconnecting", "err", err)
			}
			return true
		}
		l.wake(n.Payload)
	}
}

// listenCheck is how often a quiet listening connection is pinged.
const listenCheck = 5 * time.Second

// close stops the listener and waits for it, or for ctx.
func (l *listener) close(ctx context.Context) error {
	l.mu.Lock()
	l.cancel()
	l.mu.Unlock()
	return driverkit.Wait(ctx, &l.wg)
}
