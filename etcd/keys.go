package etcd

import (
	"fmt"
	"sync"

	"github.com/padlock-go/padlock/driverkit"
)

// queuePrefix is the range holding the queue of one name, ending in '/'.
func (d *driver) queuePrefix(name string) string {
	// Escaping '/' keeps "a" from being a prefix of "a/b".
	return d.prefix + "/" + driverkit.EscapeName(name, "/") + "/"
}

// slotKey is one of a driver's keys under one name: prefix/<name>/<driver
// id>-<slot>. An acquisition takes the lowest slot the driver has free for
// the name, and gives it back once its key is surely deleted, so a name
// used for a long time has as many keys as it ever had acquisitions of
// this driver at once, not one per acquisition. (etcd keeps a deleted
// key's index entry until compaction, and every prefix range over the name
// walks the entries: a new key per acquisition slowed a hot name down by
// 4× within a minute.) A re-created key gets a new create revision, which
// stays the fencing token and guards every delete of a hold.
//
// The driver id makes the key unique across clients; the slot across the
// acquisitions of one client. (etcd's concurrency.Mutex uses one key per
// session, which makes two goroutines of one session share a hold by
// accident.)
type slotKey struct {
	name, key string
	slot      int
}

// slots hands out key slots per name.
type slots struct {
	id    string // the driver's random id
	mu    sync.Mutex
	inUse map[string]map[int]struct{} // per name; a name with none is dropped
}

func newSlots() *slots {
	return &slots{id: driverkit.NewID()[:16], inUse: map[string]map[int]struct{}{}}
}

// take returns the lowest slot free for name, now in use.
func (s *slots) take(pfx, name string) slotKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	used := s.inUse[name]
	if used == nil {
		used = map[int]struct{}{}
		s.inUse[name] = used
	}
	slot := 0
	for {
		if _, ok := used[slot]; !ok {
			break
		}
		slot++
	}
	used[slot] = struct{}{}
	return slotKey{name: name, slot: slot, key: fmt.Sprintf("%s%s-%d", pfx, s.id, slot)}
}

// free gives k's slot back. Call it only once k's key is surely gone: a
// slot whose key may still exist (a delete or put with an unknown outcome)
// must never be handed out again.
func (s *slots) free(k slotKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	used := s.inUse[k.name]
	delete(used, k.slot)
	if len(used) == 0 {
		delete(s.inUse, k.name)
	}
}

// isFree reports whether k's slot is free: no acquisition uses it, and its
// key was surely deleted when it was freed.
func (s *slots) isFree(k slotKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, used := s.inUse[k.name][k.slot]
	return !used
}
