package memory

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// store is the "server": one per URL host, shared by every Locker of the
// process that opens the same mem:// URL.
type store struct {
	mu          sync.Mutex
	names       map[string]*entry
	tokens      map[string]uint64        // fencing counters; outlive entries on purpose
	forced      []backends.ForcedRelease // records of forced releases (ForcedReleases)
	down        bool                     // the store is down for every client
	cut         map[string]bool          // clients cut off from the store
	frozen      map[string]*freeze       // clients whose requests hang
	slowGrants  map[string]time.Duration // clients whose grants answer late (SlowGrants)
	stuck       map[string]int           // requests hanging on a freeze, by client
	slowGranted map[string]int           // grants answered late, by client (SlowGranted)
	nextID      uint64
	restart     chan struct{} // closed and replaced by Restart
	changed     chan struct{} // closed and replaced on every change of any name (Watch)
}

// entry is the state of one name while anyone holds or waits for it.
type entry struct {
	s       *store
	holds   map[uint64]*claim // live holds by hold id: one writer, readers, or permits
	queue   []*claim          // waiters in arrival order
	changed chan struct{}     // closed and replaced on every change
}

// claim is one hold or waiter of a name.
type claim struct {
	id     uint64
	mode   backends.Mode
	limit  int
	token  uint64 // holds only
	expiry time.Time
	ident  backends.Identity // for Holders
	elect  bool              // a candidacy; value is its leader's value
	value  string
}

// admits reports whether c may be granted now, by backends.Mode's rule,
// with ahead the waiters in line before it (the whole line for a single
// try, which never joins it).
func (e *entry) admits(c *claim, ahead []*claim) bool {
	if c.mode == backends.Shared {
		for _, h := range e.holds {
			if h.mode == backends.Exclusive {
				return false
			}
		}
		for _, w := range ahead {
			if w.mode == backends.Exclusive {
				return false
			}
		}
		return true
	}
	for _, h := range e.holds {
		if h.mode == backends.Shared {
			return false
		}
	}
	return len(e.holds)+len(ahead) < c.limit
}

// mismatch returns the error for a request whose limit differs from a live
// hold's or waiter's on the name, or nil.
func (e *entry) mismatch(name string, c *claim) error {
	check := func(o *claim) error {
		if o.limit != c.limit {
			return driverkit.LimitMismatch(name, o.limit, c.limit)
		}
		return nil
	}
	for _, h := range e.holds {
		if err := check(h); err != nil {
			return err
		}
	}
	for _, w := range e.queue {
		if err := check(w); err != nil {
			return err
		}
	}
	return nil
}

var stores = struct {
	sync.Mutex
	m map[string]*store
}{m: map[string]*store{}}

func storeFor(name string) *store {
	stores.Lock()
	defer stores.Unlock()
	s := stores.m[name]
	if s == nil {
		s = &store{names: map[string]*entry{}, tokens: map[string]uint64{},
			cut: map[string]bool{}, frozen: map[string]*freeze{}, stuck: map[string]int{}, slowGrants: map[string]time.Duration{}, slowGranted: map[string]int{},
			restart: make(chan struct{}), changed: make(chan struct{})}
		stores.m[name] = s
	}
	return s
}

// entryLocked returns the live entry of name, expiring a stale holder.
func (s *store) entryLocked(name string, now time.Time) *entry {
	e := s.names[name]
	if e == nil {
		e = &entry{s: s, holds: map[uint64]*claim{}, changed: make(chan struct{})}
		s.names[name] = e
	}
	for id, h := range e.holds {
		if !now.Before(h.expiry) {
			delete(e.holds, id)
			e.broadcast()
		}
	}
	return e
}

// gcLocked drops the entry of name when nobody holds or waits for it.
func (s *store) gcLocked(name string) {
	if e := s.names[name]; e != nil && len(e.holds) == 0 && len(e.queue) == 0 {
		delete(s.names, name)
	}
}

func (e *entry) broadcast() {
	close(e.changed)
	e.changed = make(chan struct{})
	close(e.s.changed)
	e.s.changed = make(chan struct{})
}

// lockFor takes s.mu for a request of client, first waiting, without
// regard for any context, while the client is frozen: the way a client
// library that ignores deadlines behaves on a silent network. Only closed
// (the client's driver closing) ends the wait early.
func (s *store) lockFor(client string, closed <-chan struct{}) {
	s.mu.Lock()
	for {
		f := s.frozen[client]
		if f == nil {
			return
		}
		s.stuck[client]++
		s.mu.Unlock()
		gone := false
		select {
		case <-f.ch:
		case <-closed:
			gone = true // the caller's driver closed: it answers ErrClosed
		}
		s.mu.Lock()
		s.stuck[client]--
		if gone {
			return
		}
	}
}

var errStoreDown = errors.New("mem store is down")

func (s *store) isDown() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.down
}

func (s *store) reachable(client string) error {
	if s.down {
		return driverkit.Unavailable("mem", errStoreDown)
	}
	if s.cut[client] {
		return fmt.Errorf("%w: mem client %q is cut off from its store", backends.ErrUnavailable, client)
	}
	return nil
}

// grantLocked makes c a hold of name, for req, with the name's next token.
func (s *store) grantLocked(req backends.Request, e *entry, c *claim, now time.Time) uint64 {
	s.tokens[req.Name]++
	c.token, c.expiry, c.ident = s.tokens[req.Name], now.Add(req.TTL), driverkit.IdentityOf(req)
	c.elect, c.value = req.Elect, req.Value
	e.holds[c.id] = c
	e.broadcast() // for watchers (Watch); waiters look again and wait on
	return c.token
}

// dequeue takes c out of the line, waking those behind it: a reader behind
// a writer that gave up may be admitted now.
func (e *entry) dequeue(c *claim) {
	if i := slices.Index(e.queue, c); i >= 0 {
		e.queue = slices.Delete(e.queue, i, i+1)
		e.broadcast()
	}
}

// keys lists every holder and waiter, one entry each.
func (s *store) keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	var out []string
	for name := range s.names {
		e := s.entryLocked(name, now)
		for id := range e.holds {
			out = append(out, fmt.Sprintf("%s#holder-%d", name, id))
		}
		for _, w := range e.queue {
			out = append(out, fmt.Sprintf("%s#waiter-%d", name, w.id))
		}
		s.gcLocked(name)
	}
	slices.Sort(out)
	return out
}
