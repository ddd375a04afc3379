// Package memory is padlock's in-process backend, registered as mem://. All
// Lockers of a process that open the same mem://NAME share one store, which
// behaves like a server: leases expire, waiters queue in FIFO order and are
// woken by the store, and fencing tokens increase per name.
//
// It exists for users' unit tests and to test the conformance suite itself.
// The fault hooks (Cut, Restart) let tests take the "server" away from one
// client, the way a partition would.
//
// A store lives as long as the process: its holds, its fault settings
// (Cut, Down, Freeze, SlowGrants) and its counters outlast a test that did
// not undo them, and are shared by tests run in parallel or again with
// -count. Give each test a store of its own (named after t.Name() and a
// counter, say) and undo each fault hook in t.Cleanup.
package memory

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// Scheme is the URL scheme of this backend: mem://STORE?client=ID.
const Scheme = "mem"

func init() { padlock.Register(Scheme, open) }

var anonClients atomic.Uint64

func open(_ context.Context, u *url.URL, _ backends.Config) (backends.Driver, error) {
	if err := driverkit.CheckParams(u, "client"); err != nil {
		return nil, err
	}
	if u.Path != "" && u.Path != "/" {
		return nil, fmt.Errorf("%w: mem:// takes a store name as host and no path, got %q", backends.ErrInvalidURL, u.Path)
	}
	if storeFor(u.Host).isDown() {
		return nil, driverkit.Unavailable("mem store "+u.Host, errStoreDown)
	}
	client := u.Query().Get("client")
	if client == "" {
		client = "anon-" + strconv.FormatUint(anonClients.Add(1), 10)
	}
	return &driver{s: storeFor(u.Host), client: client, closed: make(chan struct{})}, nil
}

// Cut cuts the client ID off from store (true) or reconnects it (false).
// A cut client's requests fail with ErrUnavailable, so its holds cannot be
// renewed and expire in the store.
func Cut(storeName, client string, cut bool) {
	s := storeFor(storeName)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cut[client] = cut
	for _, e := range s.names {
		e.broadcast()
	}
}

// Down takes the store down (true) for every client, old and new, or
// brings it back (false) with its state: requests and Opens fail with
// ErrUnavailable meanwhile, the way they do against a crashed server.
func Down(storeName string, down bool) {
	s := storeFor(storeName)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
	for _, e := range s.names {
		e.broadcast()
	}
}

// Freeze makes every request of client ID hang, ignoring its context, until
// the returned function is called: a silent network seen through a client
// library that does not honour deadlines. Tests use it to check that a
// hold's Done still closes on time. A later Freeze of the same client
// replaces this one: this one's thaw then releases only the requests that
// waited on it (they wait on the later one if it is still in force), and
// the later one's thaw ends the freeze, every earlier one's waiters too.
func Freeze(storeName, client string) (thaw func()) {
	s := storeFor(storeName)
	s.mu.Lock()
	defer s.mu.Unlock()
	f := &freeze{ch: make(chan struct{}), prev: s.frozen[client]}
	s.frozen[client] = f
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		f.release()
		if s.frozen[client] == f {
			delete(s.frozen, client)
			for p := f.prev; p != nil; p = p.prev {
				p.release()
			}
		}
	}
}

// freeze is one Freeze of a client: its waiters wait on ch.
type freeze struct {
	ch   chan struct{}
	once sync.Once
	prev *freeze // the freeze it replaced, if any
}

func (f *freeze) release() { f.once.Do(func() { close(f.ch) }) }

// SlowGrants delays the answer to every acquisition of client ID that the
// store grants by d (0: no delay), after granting it: a paused process or
// a slow network on the way back, which the grant's lease may not outlive.
func SlowGrants(storeName, client string, d time.Duration) {
	s := storeFor(storeName)
	s.mu.Lock()
	defer s.mu.Unlock()
	if d <= 0 {
		delete(s.slowGrants, client)
		return
	}
	s.slowGrants[client] = d
}

// SlowGranted reports how many grants to client ID the store has answered
// late (SlowGrants) so far, so tests can wait for stale grants to have
// come instead of sleeping through them.
func SlowGranted(storeName, client string) int {
	s := storeFor(storeName)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.slowGranted[client]
}

// Stuck reports how many requests of client ID are hanging on a Freeze
// right now, so tests can wait for a renewal to be in flight.
func Stuck(storeName, client string) int {
	s := storeFor(storeName)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stuck[client]
}

// Restart simulates a store restart without persistence of holds: every
// hold and waiter is dropped, and waiters get ErrUnavailable. Fencing
// counters survive, as if persisted.
func Restart(storeName string) {
	s := storeFor(storeName)
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, e := range s.names {
		e.broadcast()
		delete(s.names, name)
	}
	close(s.restart)
	s.restart = make(chan struct{})
}

// Keys lists every holder and waiter in store, one entry each; tests use it
// to check that nothing is left behind.
func Keys(storeName string) []string { return storeFor(storeName).keys() }

type driver struct {
	s      *store
	client string
	closed chan struct{} // closed by Close: requests frozen or slowed end
	close  sync.Once
}

// lockFor takes the store's lock for a request of d's client, waiting
// while the client is frozen (store.lockFor), but no longer once d is
// closed: a Locker's Close ends even the calls that ignore their context
// by closing its driver, and reachable then refuses the request.
func (d *driver) lockFor() { d.s.lockFor(d.client, d.closed) }

// reachable reports whether the store answers d's client now: not once d
// is closed (ErrClosed), nor while the store is down or the client cut.
func (d *driver) reachable() error {
	select {
	case <-d.closed:
		return fmt.Errorf("%w: mem driver closed", backends.ErrClosed)
	default:
	}
	return d.s.reachable(d.client)
}

// Capabilities: the store is one linearizable process with no replicas, so
// it is CP, and its fencing counters survive a simulated Restart (as if
// persisted). Holds do not: a Restart drops them, as a server without
// persistence would.
func (d *driver) Capabilities() backends.Capabilities {
	return backends.Capabilities{
		Consistency: backends.CP, FairFIFO: true, MonotonicTokens: true,
		FencingSurvivesFailover: true, PushWakeup: true, DoneBeforeRegrant: true,
		HoldsSurviveRestart: backends.No, SharedLocks: true, Limits: true, Elections: true,
	}
}

// Close ends the driver's requests that wait on a Freeze or a SlowGrants
// delay: they fail with ErrClosed.
func (d *driver) Close(context.Context) error {
	d.close.Do(func() { close(d.closed) })
	return nil
}

func (d *driver) Acquire(ctx context.Context, req backends.Request) (backends.Hold, error) {
	s := d.s
	sent := time.Now()
	d.lockFor()
	if err := d.reachable(); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	s.nextID++
	c := &claim{id: s.nextID, mode: req.Mode, limit: max(req.Limit, 1)}
	e := s.entryLocked(req.Name, sent)
	if err := e.mismatch(req.Name, c); err != nil {
		s.gcLocked(req.Name)
		s.mu.Unlock()
		return nil, err
	}
	if e.admits(c, e.queue) {
		tok := s.grantLocked(req, e, c, sent)
		s.mu.Unlock()
		return d.hold(req, c, tok, sent), nil
	}
	if !req.Wait {
		s.gcLocked(req.Name)
		s.mu.Unlock()
		return nil, backends.ErrNotAcquired
	}
	e.queue = append(e.queue, c)
	for {
		// Wait for a change, the first hold's expiry, a restart or ctx.
		changed, restart := e.changed, s.restart
		wait := time.Hour // no hold: the waiters ahead are being woken
		for _, h := range e.holds {
			wait = min(wait, max(time.Until(h.expiry), time.Millisecond))
		}
		s.mu.Unlock()
		t := time.NewTimer(wait)
		var err error
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-restart:
			err = fmt.Errorf("%w: mem store restarted", backends.ErrUnavailable)
		case <-changed:
		case <-t.C:
		}
		t.Stop()
		sent = time.Now()
		s.mu.Lock()
		if err == nil && s.names[req.Name] != e {
			err = fmt.Errorf("%w: mem store restarted", backends.ErrUnavailable)
		}
		if err == nil {
			err = d.reachable()
		}
		if err != nil {
			if s.names[req.Name] == e {
				e.dequeue(c)
				s.gcLocked(req.Name)
			}
			s.mu.Unlock()
			return nil, err
		}
		e = s.entryLocked(req.Name, sent)
		if i := slices.Index(e.queue, c); e.admits(c, e.queue[:i]) {
			e.dequeue(c)
			tok := s.grantLocked(req, e, c, sent)
			s.mu.Unlock()
			return d.hold(req, c, tok, sent), nil
		}
	}
}

func (d *driver) hold(req backends.Request, c *claim, tok uint64, sent time.Time) *hold {
	// A grant made while the client waited reaches it no sooner than the
	// client is heard again: a frozen client's answer waits for the thaw,
	// as on a silent network (the request got through before the freeze).
	d.lockFor()
	d.s.mu.Unlock()
	d.slowAnswer()
	return d.newHold(req, c, tok, sent)
}

// slowAnswer delays a granting answer on its way back (SlowGrants).
func (d *driver) slowAnswer() {
	d.s.mu.Lock()
	slow := d.s.slowGrants[d.client]
	d.s.mu.Unlock()
	if slow > 0 {
		t := time.NewTimer(slow)
		select {
		case <-t.C:
		case <-d.closed:
		}
		t.Stop()
	}
	if slow > 0 {
		d.s.mu.Lock()
		d.s.slowGranted[d.client]++
		d.s.mu.Unlock()
	}
}

func (d *driver) newHold(req backends.Request, c *claim, tok uint64, sent time.Time) *hold {
	return &hold{d: d, name: req.Name, id: c.id, token: tok, ttl: req.TTL,
		grant: backends.Grant{Sent: sent, TTL: req.TTL}}
}

type hold struct {
	d     *driver
	name  string
	id    uint64
	token uint64
	ttl   time.Duration
	grant backends.Grant
}

func (h *hold) Token() uint64 { return h.token }

// Follows implements backends.Successor: every grant of a name takes the
// next of its tokens, so the hold before this one has the token below.
func (h *hold) Follows() (uint64, bool) { return h.token - 1, h.token > 1 }
func (h *hold) Grant() backends.Grant   { return h.grant }

// live returns the hold's claim in the store, or ErrNotHeld; s.mu held.
func (h *hold) live(now time.Time) (*entry, *claim, error) {
	s := h.d.s
	if s.names[h.name] != nil {
		e := s.entryLocked(h.name, now)
		if c := e.holds[h.id]; c != nil {
			return e, c, nil
		}
	}
	return nil, nil, fmt.Errorf("%w: mem hold %d of %q expired or was dropped", backends.ErrNotHeld, h.id, h.name)
}

func (h *hold) Renew(ctx context.Context) (backends.Grant, error) {
	return h.extend(nil)
}

// Share turns a writer into a reader, in place: its token, place and
// lease stay; readers waiting for it are woken.
func (h *hold) Share(ctx context.Context) (backends.Grant, error) {
	return h.extend(func(e *entry, c *claim) {
		c.mode = backends.Shared
		e.broadcast()
	})
}

// extend renews the hold's lease from now, after applying change (if
// any) to its claim, as one request to the store.
func (h *hold) extend(change func(*entry, *claim)) (backends.Grant, error) {
	s := h.d.s
	sent := time.Now()
	h.d.lockFor()
	defer s.mu.Unlock()
	if err := h.d.reachable(); err != nil {
		return backends.Grant{}, err
	}
	e, c, err := h.live(sent)
	if err != nil {
		return backends.Grant{}, err
	}
	if change != nil {
		change(e, c)
	}
	c.expiry = sent.Add(h.ttl)
	return backends.Grant{Sent: sent, TTL: h.ttl}, nil
}

// Proclaim replaces a candidacy's value while it holds the name.
func (h *hold) Proclaim(ctx context.Context, value string) error {
	s := h.d.s
	h.d.lockFor()
	defer s.mu.Unlock()
	if err := h.d.reachable(); err != nil {
		return err
	}
	e, c, err := h.live(time.Now())
	if err != nil {
		return err
	}
	c.value = value
	e.broadcast()
	return nil
}

// Watch signals every change in the store (a superset of the changes of
// name: spurious signals are allowed), and each hold's expiry.
func (d *driver) Watch(ctx context.Context, name string) (<-chan struct{}, error) {
	out := make(chan struct{}, 1)
	// What to wait for is read before Watch returns: a change right after
	// it is signalled.
	next := func() (<-chan struct{}, time.Duration) {
		s := d.s
		s.mu.Lock()
		defer s.mu.Unlock()
		wait := time.Hour
		if e := s.names[name]; e != nil {
			for _, h := range e.holds {
				wait = min(wait, max(time.Until(h.expiry), time.Millisecond))
			}
		}
		return s.changed, wait
	}
	changed, wait := next()
	go func() {
		defer close(out)
		for {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-changed:
			case <-t.C:
			}
			t.Stop()
			changed, wait = next()
			select {
			case out <- struct{}{}:
			default:
			}
		}
	}()
	return out, nil
}

// Leader returns the candidacy that holds name, if any.
func (d *driver) Leader(ctx context.Context, name string) (backends.Leader, bool, error) {
	s := d.s
	d.lockFor()
	defer s.mu.Unlock()
	if err := d.reachable(); err != nil {
		return backends.Leader{}, false, err
	}
	if s.names[name] == nil {
		return backends.Leader{}, false, nil
	}
	for _, c := range s.entryLocked(name, time.Now()).holds {
		if c.elect {
			return backends.Leader{Value: c.value, Token: c.token}, true, nil
		}
	}
	return backends.Leader{}, false, nil
}

func (h *hold) Release(ctx context.Context) error {
	s := h.d.s
	h.d.lockFor()
	defer s.mu.Unlock()
	if err := h.d.reachable(); err != nil {
		return err
	}
	e, _, err := h.live(time.Now())
	if err != nil {
		return err
	}
	delete(e.holds, h.id)
	e.broadcast()
	s.gcLocked(h.name)
	return nil
}

// Holders lists the store's holds under prefix, one entry per hold.
func (d *driver) Holders(ctx context.Context, prefix string) ([]backends.Holder, error) {
	s := d.s
	d.lockFor()
	defer s.mu.Unlock()
	if err := d.reachable(); err != nil {
		return nil, err
	}
	now := time.Now()
	var out []backends.Holder
	for name := range s.names {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		e := s.entryLocked(name, now)
		for _, c := range e.holds {
			out = append(out, e.holderInfo(name, c))
		}
	}
	slices.SortFunc(out, func(a, b backends.Holder) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), cmp.Compare(a.Token, b.Token))
	})
	return out, nil
}

func (e *entry) holderInfo(name string, c *claim) backends.Holder {
	return backends.Holder{Name: name, Token: c.token, ID: fmt.Sprint(c.id),
		Host: c.ident.Host, PID: c.ident.PID, Owner: c.ident.Owner,
		Since: time.UnixMilli(c.ident.At), Expires: c.expiry, Waiters: len(e.queue),
		Mode: c.mode, Limit: c.limit, Elect: c.elect, Value: c.value}
}

// ForceRelease drops every hold of name (a writer, or all its readers or
// permits) and returns the oldest; each leaves a record. Their next
// renewals fail.
func (d *driver) ForceRelease(ctx context.Context, name string) (backends.Holder, error) {
	s := d.s
	d.lockFor()
	defer s.mu.Unlock()
	if err := d.reachable(); err != nil {
		return backends.Holder{}, err
	}
	e := s.names[name]
	if e == nil || len(s.entryLocked(name, time.Now()).holds) == 0 {
		return backends.Holder{}, fmt.Errorf("%w: nobody holds %q", backends.ErrNotHeld, name)
	}
	var first backends.Holder
	for id, c := range e.holds {
		h := e.holderInfo(name, c)
		if first.ID == "" || h.Token < first.Token {
			first = h
		}
		s.recordForcedLocked(h)
		delete(e.holds, id)
	}
	e.broadcast()
	s.gcLocked(name)
	return first, nil
}
