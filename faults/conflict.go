package faults

// What conflicts with what, for the checker and for the scenarios that
// wait for a conflicting grant: a writer's hold (the mutex, a leader, a
// multi-lock's name) with any other client's hold on its name; a reader's
// with a writer's only; a permit's with a grant that makes more than the
// limit of holds on its name at once.

// hold is one client's critical section on one name.
type hold struct {
	client     int
	token      uint64
	name       string
	kind       Kind
	start, end int64
	faulted    bool // the hold a fault was aimed at
	stalled    bool // its Done came late in a stall of its process (see stallProbe)
}

// holdKey identifies a client's open hold of a name.
type holdKey struct {
	client int
	name   string
}

// kindOf is an event's kind, a writer when it records none.
func kindOf(e Event) Kind {
	if e.Kind == "" {
		return Writer
	}
	return e.Kind
}

// holdsOf reads the holds of a history (sorted by time), each from its
// grant to its release, its Done closing or its client's end, whichever
// comes first (the end of the history if none).
func holdsOf(evs []Event) []*hold {
	endOfRun := int64(0)
	if len(evs) > 0 {
		endOfRun = evs[len(evs)-1].T
	}
	var holds []*hold
	open := map[holdKey]*hold{}
	closeHold := func(k holdKey, t int64) {
		if h := open[k]; h != nil {
			h.end = t
			delete(open, k)
		}
	}
	for _, e := range evs {
		k := holdKey{e.Client, e.Name}
		switch {
		case e.Op == OpAcquire && e.Phase == OK:
			closeHold(k, e.T)
			h := &hold{client: e.Client, token: e.Token, name: e.Name, kind: kindOf(e), start: e.T, end: endOfRun}
			holds = append(holds, h)
			open[k] = h
		case e.Op == OpRelease && e.Phase == Invoke:
			closeHold(k, e.T)
		case e.Op == OpExit:
			for k := range open {
				if k.client == e.Client {
					closeHold(k, e.T)
				}
			}
		case e.Op == OpLost:
			if h := open[k]; h != nil && h.token == e.Token {
				closeHold(k, e.T)
			}
		}
	}
	return holds
}

// pairConflict reports whether holds a and b of two clients exclude each
// other (permits are counted, not paired: see limitConflict).
func pairConflict(a, b *hold) bool {
	return a.client != b.client && a.name == b.name && a.kind != Permit && b.kind != Permit &&
		(a.kind.exclusive() || b.kind.exclusive())
}

// openAt counts the permit holds on name open at t, other than skip's.
func openAt(holds []*hold, name string, t int64, skip *hold) int {
	n := 0
	for _, h := range holds {
		if h != skip && h.kind == Permit && h.name == name && h.start <= t && t < h.end {
			n++
		}
	}
	return n
}

// conflicts reports whether g, granted while v was held (by v's own
// account), conflicts with v: excludes it, or, for permits, made more
// than limit holds at once with v.
func conflicts(holds []*hold, v, g *hold, limit int) bool {
	if v.kind == Permit && g.kind == Permit {
		return g.client != v.client && g.name == v.name && openAt(holds, v.name, g.start, v)+1 > limit
	}
	return pairConflict(v, g)
}

// firstConflict is the first hold granted after t that conflicts with any
// of vs (one acquisition's holds: two for a multi-lock), taking vs as held
// until then; nil if none.
func firstConflict(holds []*hold, vs []*hold, t int64, limit int) *hold {
	for _, g := range holds {
		if g.start <= t {
			continue
		}
		for _, v := range vs {
			if conflicts(holds, v, g, limit) {
				return g
			}
		}
	}
	return nil
}

// acquisition is h and the holds its client was granted with it (a
// multi-lock's other name).
func acquisition(holds []*hold, h *hold) []*hold {
	var out []*hold
	for _, o := range holds {
		if o.client == h.client && o.start == h.start {
			out = append(out, o)
		}
	}
	return out
}

// holdOf is client's hold with token (on name, unless name is "*") that
// an event at t belongs to: the latest granted at or before t, since a
// client may be granted one token twice (RedLock's highest of per-master
// counters, a Redis that lost its counter), else the first; or nil.
func holdOf(holds []*hold, client int, name string, token uint64, t int64) *hold {
	var first, out *hold
	for _, h := range holds {
		if h.client == client && h.token == token && (name == "*" || h.name == name) {
			if first == nil {
				first = h
			}
			if h.start <= t {
				out = h
			}
		}
	}
	if out == nil {
		return first
	}
	return out
}

// holdAt is client's latest hold with token granted at or before t (a
// fault's victim: tokens of different names, or of one name before a
// restart, may repeat), or nil.
func holdAt(holds []*hold, client int, token uint64, t int64) *hold {
	var out *hold
	for _, h := range holds {
		if h.client == client && h.token == token && h.start <= t {
			out = h
		}
	}
	return out
}
