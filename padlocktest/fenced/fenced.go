// Package fenced is a toy storage service that enforces fencing tokens: it
// accepts a write only if its token is at least the highest token it has
// seen for that key. A holder that lost its lock without noticing (a long
// pause, a partition) writes with an older token and is rejected. The demo
// and the tests use it to show that tokens do their job.
package fenced

import "sync"

// Store is safe for concurrent use.
type Store struct {
	mu       sync.Mutex
	last     map[string]uint64
	values   map[string]int64
	accepted int64
	rejected int64
}

// NewStore returns an empty store.
func NewStore() *Store {
	return &Store{last: map[string]uint64{}, values: map[string]int64{}}
}

// Write adds delta to key's value if token is not older than the newest token
// seen for key, and reports whether it did.
func (s *Store) Write(key string, token uint64, delta int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if token < s.last[key] {
		s.rejected++
		return false
	}
	s.last[key] = token
	s.values[key] += delta
	s.accepted++
	return true
}

// Value returns key's value.
func (s *Store) Value(key string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.values[key]
}

// Accepted returns how many writes were accepted.
func (s *Store) Accepted() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepted
}

// Rejected returns how many writes were rejected as stale.
func (s *Store) Rejected() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rejected
}
