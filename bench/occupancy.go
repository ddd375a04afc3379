package bench

import (
	"context"
	"fmt"
	"sync"
)

// holdKind is what one acquisition holds: a writer (the mutex's one
// hold), a reader, or a permit of limit.
type holdKind struct {
	reader bool
	limit  int // permits of a semaphore; 1: exclusive
}

var writer = holdKind{limit: 1}

// acquirer returns client i's acquisition on load: Lock on the mutex
// workloads (and on a recipe's mutex baseline), RLock for R1's readers,
// a permit of Limit on S1, a Campaign on E1.
func acquirer(load Load, c Client, i int) (func(ctx context.Context, name string, reader bool) (Held, holdKind, error), error) {
	lock := func(ctx context.Context, name string, _ bool) (Held, holdKind, error) {
		h, err := c.Lock(ctx, name)
		return h, writer, err
	}
	inner := unwrap(c)
	if _, ok := inner.(mutexClient); ok || !recipe(load.Workload) {
		return lock, nil
	}
	switch load.Workload {
	case R1:
		rc, ok := inner.(readClient)
		if !ok {
			return nil, fmt.Errorf("%w: the client has no readers", errNA)
		}
		return func(ctx context.Context, name string, reader bool) (Held, holdKind, error) {
			if !reader {
				return lock(ctx, name, false)
			}
			h, err := rc.RLock(ctx, name)
			return h, holdKind{reader: true}, err
		}, nil
	case S1:
		lc, ok := inner.(limitClient)
		if !ok {
			return nil, fmt.Errorf("%w: the client has no semaphore", errNA)
		}
		kind := holdKind{limit: load.Limit}
		return func(ctx context.Context, name string, _ bool) (Held, holdKind, error) {
			h, err := lc.LockLimit(ctx, name, load.Limit)
			return h, kind, err
		}, nil
	}
	ec, ok := inner.(electClient)
	if !ok {
		return nil, fmt.Errorf("%w: the client has no election", errNA)
	}
	value := fmt.Sprintf("candidate-%d", i)
	return func(ctx context.Context, name string, _ bool) (Held, holdKind, error) {
		t, err := ec.Campaign(ctx, name, value)
		return t.Held, writer, err
	}, nil
}

// occupancy is who holds one name of R1 or S1 at each moment, as the
// clients saw it: a hold counts from its acquisition's return to its
// release's call. It checks each grant against the recipe's rule, and
// each token against those of the holds that ended before it was asked.
type occupancy struct {
	mu               sync.Mutex
	writers, sharing int    // exclusive holds; readers or permits
	most             int    // the most holds at once
	endedMax         uint64 // the greatest token + 1 of a hold whose release returned
}

// enter counts a grant of kind, and says how it broke the rule: a writer
// beside anyone, a reader beside a writer, a permit beyond its limit, or
// (with tokens) a token not above that of a hold that had ended when it
// was asked (ended, from endedToken).
func (o *occupancy) enter(kind holdKind, tokens bool, token, ended uint64) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	var err error
	switch {
	case kind.reader && o.writers > 0:
		err = fmt.Errorf("a reader was granted while a writer held it")
	case !kind.reader && kind.limit == 1 && o.writers+o.sharing > 0:
		err = fmt.Errorf("a writer was granted beside %d writers and %d readers", o.writers, o.sharing)
	case kind.limit > 1 && o.writers+o.sharing >= kind.limit:
		err = fmt.Errorf("permit %d of %d was granted", o.writers+o.sharing+1, kind.limit)
	case tokens && ended != 0 && token+1 <= ended:
		err = fmt.Errorf("granted with token %d, not above token %d of a hold that ended before it was asked", token, ended-1)
	}
	if kind.reader || kind.limit > 1 {
		o.sharing++
	} else {
		o.writers++
	}
	o.most = max(o.most, o.writers+o.sharing)
	return err
}

// leave uncounts a hold of kind whose release is being called.
func (o *occupancy) leave(kind holdKind) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if kind.reader || kind.limit > 1 {
		o.sharing--
	} else {
		o.writers--
	}
}

// ended records the token of a hold whose release returned.
func (o *occupancy) ended(token uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.endedMax = max(o.endedMax, token+1)
}

// endedToken is the greatest token + 1 of the holds ended so far (0:
// none).
func (o *occupancy) endedToken() uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.endedMax
}
