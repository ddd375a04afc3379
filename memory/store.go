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
	mu         sync.Mutex
	names      map[string]*entry
	tokens     map[string]uint64        // fencing counters; outlive entries on purpose
	forced     []backends.ForcedRelease // records of forced releases (ForcedReleases)
	down       bool                     // the store is down for every client
	cut        map[string]bool          // clients cut off from the store
	frozen     map[string]chan struct{} // clients whose requests hang
	slowGrants map[string]time.Duration // clients whose grants answer late (SlowGrants)
	stuck      map[string]int           // requests hanging on a freeze, by client
	nextID     uint64
	restart    chan struct{} // closed and replaced by Restart
}

// entry is the state of one name while anyone holds or waits for it.
type entry struct {
	holder  uint64 // hold id, 0 when free
	token   uint64
	expiry  time.Time
	queue   []uint64          // waiter ids in arrival order
	ident   backends.Identity // the holder's, for Holders
	changed chan struct{}     // closed and replaced on every change
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
			cut: map[string]bool{}, frozen: map[string]chan struct{}{}, stuck: map[string]int{}, slowGrants: map[string]time.Duration{},
			restart: make(chan struct{})}
		stores.m[name] = s
	}
	return s
}

// entryLocked returns the live entry of name, expiring a stale holder.
func (s *store) entryLocked(name string, now time.Time) *entry {
	e := s.names[name]
	if e == nil {
		e = &entry{changed: make(chan struct{})}
		s.names[name] = e
	}
	if e.holder != 0 && !now.Before(e.expiry) {
		e.holder = 0
		e.broadcast()
	}
	return e
}

// gcLocked drops the entry of name when nobody holds or waits for it.
func (s *store) gcLocked(name string) {
	if e := s.names[name]; e != nil && e.holder == 0 && len(e.queue) == 0 {
		delete(s.names, name)
	}
}

func (e *entry) broadcast() {
	close(e.changed)
	e.changed = make(chan struct{})
}

// lockFor takes s.mu for a request of client, first waiting, without
// regard for any context, while the client is frozen: the way a client
// library that ignores deadlines behaves on a silent network.
func (s *store) lockFor(client string) {
	s.mu.Lock()
	for {
		thaw := s.frozen[client]
		if thaw == nil {
			return
		}
		s.stuck[client]++
		s.mu.Unlock()
		<-thaw
		s.mu.Lock()
		s.stuck[client]--
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

// grantLocked makes id the holder of name for req.
func (s *store) grantLocked(req backends.Request, e *entry, id uint64, now time.Time) uint64 {
	s.tokens[req.Name]++
	e.holder, e.token, e.expiry, e.ident = id, s.tokens[req.Name], now.Add(req.TTL), driverkit.IdentityOf(req)
	return e.token
}

func (e *entry) dequeue(id uint64) {
	if i := slices.Index(e.queue, id); i >= 0 {
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
		if e.holder != 0 {
			out = append(out, fmt.Sprintf("%s#holder-%d", name, e.holder))
		}
		for _, id := range e.queue {
			out = append(out, fmt.Sprintf("%s#waiter-%d", name, id))
		}
		s.gcLocked(name)
	}
	slices.Sort(out)
	return out
}
