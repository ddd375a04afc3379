package memory

import (
	"context"
	"time"

	"github.com/padlock-go/padlock/backends"
)

// AcquireAll takes every name of reqs in one request to the store, or
// none: each is granted only if Acquire would grant it at once (nobody
// holds it or waits for it), with the name's next token.
func (d *driver) AcquireAll(ctx context.Context, reqs []backends.Request) ([]backends.Hold, error) {
	s := d.s
	sent := time.Now()
	d.lockFor()
	if err := d.reachable(); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	entries := make([]*entry, len(reqs))
	claims := make([]*claim, len(reqs))
	var err error
	for i, req := range reqs {
		s.nextID++
		claims[i] = &claim{id: s.nextID, mode: req.Mode, limit: max(req.Limit, 1)}
		entries[i] = s.entryLocked(req.Name, sent)
		if err = entries[i].mismatch(req.Name, claims[i]); err != nil {
			break
		}
		if !entries[i].admits(claims[i], entries[i].queue) {
			err = backends.ErrNotAcquired
			break
		}
	}
	if err != nil {
		for _, req := range reqs {
			s.gcLocked(req.Name)
		}
		s.mu.Unlock()
		return nil, err
	}
	toks := make([]uint64, len(reqs))
	for i, req := range reqs {
		toks[i] = s.grantLocked(req, entries[i], claims[i], sent)
	}
	s.mu.Unlock()
	d.slowAnswer()
	out := make([]backends.Hold, len(reqs))
	for i, req := range reqs {
		out[i] = d.newHold(req, claims[i], toks[i], sent)
	}
	return out, nil
}
