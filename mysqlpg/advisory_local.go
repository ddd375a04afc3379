package mysqlpg

import (
	"context"
	"fmt"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// A Locker's own table of the names its advisory holds take. Advisory
// locks are reentrant per session, and a name always maps to the same
// session, so the server would grant one Locker a name twice: the table
// admits, per name, one writer, or any number of readers, or permits of
// one limit (the server then decides how many of them hold at once).
// Acquisitions that are still waiting count too: a Locker never sends the
// server a request its own holds would wrongly be granted beside.

// localKind is what an acquisition takes of a name in the local table.
type localKind uint8

const (
	localWriter localKind = iota // the name's lock (a writer), or one slot of a permit
	localReader
	localPermit
)

// localName is one name's entry: its holds (and acquisitions under way)
// in this Locker. changed is closed, and replaced, at every release.
type localName struct {
	writer           bool
	readers, permits int
	limit            int // the permits' limit
	changed          chan struct{}
}

// takeLocal claims key (a row key, hex) for one acquisition of kind (a
// permit's with limit), waiting for this Locker's other holds of the name
// to end when wait is true and the name's rule makes it wait. A permit
// beside another limit, or beside a writer or reader, and a writer or
// reader beside permits, is the limit rule's error at once.
func (a *advisory) takeLocal(ctx context.Context, key, name string, kind localKind, limit int, wait bool) error {
	asked := limit
	if kind != localPermit {
		asked = 1
	}
	for {
		a.mu.Lock()
		if a.closed {
			a.mu.Unlock()
			return fmt.Errorf("mysqlpg: %w", backends.ErrClosed)
		}
		e := a.local[key]
		if e == nil {
			e = &localName{changed: make(chan struct{})}
			a.local[key] = e
		}
		var err error
		busy := false
		switch {
		case e.permits > 0 && (kind != localPermit || e.limit != limit):
			err = driverkit.LimitMismatch(name, e.limit, asked)
		case kind == localPermit && (e.writer || e.readers > 0):
			err = driverkit.LimitMismatch(name, 1, asked)
		case kind == localWriter:
			busy = e.writer || e.readers > 0
		case kind == localReader:
			busy = e.writer
		}
		if err == nil && !busy {
			switch kind {
			case localWriter:
				e.writer = true
			case localReader:
				e.readers++
			case localPermit:
				e.permits++
				e.limit = limit
			}
			a.mu.Unlock()
			return nil
		}
		ch := e.changed
		a.forgetLocked(key, e)
		a.mu.Unlock()
		switch {
		case err != nil:
			return err
		case !wait:
			return backends.ErrNotAcquired
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// freeLocal ends one claim of kind on key and tells those waiting for it.
func (a *advisory) freeLocal(key string, kind localKind) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e := a.local[key]
	if e == nil {
		return
	}
	switch kind {
	case localWriter:
		e.writer = false
	case localReader:
		e.readers--
	case localPermit:
		e.permits--
	}
	close(e.changed)
	e.changed = make(chan struct{})
	a.forgetLocked(key, e)
}

// heldLocal reports whether a hold of this Locker (or an acquisition under
// way) has key as a writer: a permit's or MySQL reader's slot.
func (a *advisory) heldLocal(key string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	e := a.local[key]
	return e != nil && e.writer
}

// forgetLocked drops e, key's entry, if it holds nothing (a.mu held).
func (a *advisory) forgetLocked(key string, e *localName) {
	if !e.writer && e.readers == 0 && e.permits == 0 {
		delete(a.local, key)
	}
}
