package faults

import (
	"bytes"
	"context"
	"errors"
	"net/http"

	"github.com/padlock-go/padlock/fence"
)

// The fenced register is package fence's HTTP middleware (fence.Middleware)
// over a fence.Store, fencedStore, that keeps its tokens in fence.Memory
// and logs what it decides as the checker's events: the resource's reads,
// writes and checks of the fenced register pass through the same code a
// user's service runs. The resource name is the lock name
// (fence.ResourceHeader), the token the holder's (fence.TokenHeader).
//
// fence accepts a token equal to or above the highest it has seen for a
// resource and refuses a lower one; the register follows that rule, as the
// checker and docs/guarantees.md state, with the readers' exception:
//
//   - a read is contact: it raises the highest token seen (a writer's
//     read also the highest writer's), and is never refused (what a stale
//     holder read matters only if it writes, and its write is refused);
//   - a write is refused below the highest token seen (fence.Memory's
//     Record): a reader's read fences earlier writers too;
//   - a reader's or permit's check is refused only below the highest token
//     a writer has shown: readers share the name, and do not fence each
//     other (fence.Memory would refuse an older reader after a newer one).

// fencedCall is one request's part in the fenced register, which the
// resource hands fencedStore and the handler behind the middleware in the
// request's context.
type fencedCall struct {
	op     string // OpRead, OpWrite or OpCheck
	client int
	kind   Kind
	value  int64 // a write's value
	// read: what the handler behind the middleware read.
	got readings
}

type callKey struct{}

func withCall(ctx context.Context, c *fencedCall) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

func callOf(ctx context.Context) (*fencedCall, error) {
	c, ok := ctx.Value(callKey{}).(*fencedCall)
	if !ok {
		return nil, errors.New("faults: a fenced request without its call")
	}
	return c, nil
}

// fencedStore is the fenced register's fence.Store: all holds the highest
// token any holder has shown per name, writers the highest a writer has.
type fencedStore struct {
	out          *emitter
	all, writers *fence.Memory
}

func newFencedStore(out *emitter) *fencedStore {
	return &fencedStore{out: out, all: fence.NewMemory(), writers: fence.NewMemory()}
}

// raise records token in m unless m has seen a higher one: contact that
// is never refused.
func raise(ctx context.Context, m *fence.Memory, name string, token uint64) error {
	if err := m.Record(ctx, name, token); err != nil && !errors.Is(err, fence.ErrStale) {
		return err
	}
	return nil
}

// Record implements fence.Store: the rules above, one event per decision.
func (s *fencedStore) Record(ctx context.Context, name string, token uint64) error {
	c, err := callOf(ctx)
	if err != nil {
		return err
	}
	ev := Event{Client: c.client, Phase: OK, Token: token, Kind: c.kind, Name: name}
	switch c.op {
	case OpRead:
		if err := raise(ctx, s.all, name, token); err != nil {
			return err
		}
		if c.kind.writes() {
			if err := raise(ctx, s.writers, name, token); err != nil {
				return err
			}
		}
		ev.Op = OpSeen
		s.out.emit(ev)
		return nil
	case OpWrite:
		err = s.all.Record(ctx, name, token)
		if err == nil {
			// Cannot be refused: no writer's token is above all's.
			err = raise(ctx, s.writers, name, token)
		}
		ev.Value = c.value
	case OpCheck:
		if h := s.writers.Highest(name); token < h {
			err = &fence.StaleError{Resource: name, Token: token, Highest: h}
		}
		ev.Check = true
	default:
		return errors.New("faults: a fenced request of op " + c.op)
	}
	if err != nil && !errors.Is(err, fence.ErrStale) {
		return err
	}
	ev.Op, ev.Register = OpApply, "fenced"
	ev.Accepted, ev.Stale = boolp(err == nil), err != nil
	s.out.emit(ev)
	return err
}

// writerHighest is the highest token a writer has shown name's fenced
// register: checks below it are refused.
func (s *fencedStore) writerHighest(name string) uint64 { return s.writers.Highest(name) }

// fenced serves c's request through the middleware, and returns its
// status and, when it is not 200, its body (the middleware's reason).
func (r *resource) fenced(req *http.Request, c *fencedCall) (code int, reason string) {
	w := &answer{code: http.StatusOK, header: http.Header{}}
	r.fence.ServeHTTP(w, req.WithContext(withCall(req.Context(), c)))
	return w.code, string(bytes.TrimSpace(w.body.Bytes()))
}

// behindFence is the handler behind the middleware: the fenced register's
// value, read or written, once fencedStore let the request through.
func (r *resource) behindFence(w http.ResponseWriter, req *http.Request) {
	c, err := callOf(req.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	name, _, _ := fence.FromContext(req.Context())
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.regs(name)
	switch c.op {
	case OpRead:
		c.got = readings{Unfenced: g.unfenced.value, Fenced: g.fenced.value}
	case OpWrite:
		g.fenced.value, g.fenced.applied = c.value, g.fenced.applied+1
	}
}

// answer is the middleware's answer, kept for the resource's own.
type answer struct {
	code   int
	header http.Header
	body   bytes.Buffer
	wrote  bool
}

func (a *answer) Header() http.Header { return a.header }

func (a *answer) WriteHeader(code int) {
	if !a.wrote {
		a.code, a.wrote = code, true
	}
}

func (a *answer) Write(b []byte) (int, error) {
	a.WriteHeader(http.StatusOK)
	if a.body.Len() < 4096 {
		a.body.Write(b)
	}
	return len(b), nil
}
