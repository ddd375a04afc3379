package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/padlock-go/padlock/fence"
)

// The protected resource: a process of its own holding, per lock name, two
// counters that workers increment inside their critical sections, by
// reading, sleeping and writing the value read plus one, so that lost
// updates show.
//
//   - The unfenced register takes every write, as most storage does.
//   - The fenced register is package fence's HTTP middleware over a
//     fence.Memory (fenced.go): it remembers the highest token it has
//     seen, on a read or a write, and refuses any write with a lower one:
//     a client that lost its lock without knowing is turned away once a
//     newer holder has made contact (the fencing-token scheme).
//
// Each request carries its holder's token and lock name in fence's headers
// (fence.TokenHeader, fence.ResourceHeader); a read and a write go to both
// registers in one request, the unfenced one and the arming outside the
// middleware, the fenced one through it.
//
// Readers and permits write nothing: they read, then check (read-and-
// check). A reader's read is contact like any other (its token fences
// earlier writers' writes), but it does not fence other readers, who share
// the name: the fenced register also remembers the highest token a writer
// has shown, and refuses a check with a lower one (a newer writer has made
// contact, so what the reader read may be gone). Permits are readers here:
// a semaphore guards a capacity, not a value, and the limit is the
// checker's question (never more than n holders at once).
//
// Every write and check is logged as an OpApply event, stale when a higher
// token had been seen before it.
type resource struct {
	mu    sync.Mutex
	out   *emitter
	names map[string]*registers
	store *fencedStore // the fenced register's tokens
	fence http.Handler // fence.Middleware over behindFence
	// armed makes the next read (by a worker of kind armKind, if set)
	// wait, with its client inside its critical section, until release
	// (or holdBound): how a scenario catches a holder between its grant
	// and its write, for certain.
	armed   bool
	armKind Kind
	release chan struct{} // closed to let the held read go; nil when none is held
}

// holdBound is the longest a read is held: every wait is bounded.
const holdBound = 3 * time.Minute

type register struct {
	value   int64
	max     uint64 // the unfenced register's highest token seen, for its events' Stale (the fenced one's are in fencedStore)
	applied int64  // writes taken
}

// registers are one name's.
type registers struct{ unfenced, fenced register }

// regs returns name's registers, made on first use; r.mu held.
func (r *resource) regs(name string) *registers {
	g := r.names[name]
	if g == nil {
		g = &registers{}
		r.names[name] = g
	}
	return g
}

// ResourceState is the resource's final state, summed over its names.
type ResourceState struct {
	Unfenced, Fenced               int64 // the counters
	AppliedUnfenced, AppliedFenced int64 // writes taken
}

const resourceReady = "faults resource ready "

// runResource serves the resource on a free loopback port until ctx ends.
// It prints resourceReady and its address, then events, on out.
func runResource(ctx context.Context, out io.Writer) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	r := &resource{out: newEmitter(out), names: map[string]*registers{}}
	r.store = newFencedStore(r.out)
	r.fence = fence.Middleware(r.store, nil)(http.HandlerFunc(r.behindFence))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /read", r.read)
	mux.HandleFunc("POST /write", r.write)
	mux.HandleFunc("POST /check", r.check)
	mux.HandleFunc("GET /state", r.state)
	mux.HandleFunc("POST /arm", r.arm)
	mux.HandleFunc("POST /release", r.releaseHeld)
	srv := &http.Server{Handler: mux}
	fmt.Fprintln(out, resourceReady+ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		r.releaseHeld(nil, nil)
		srv.Close()
		return nil
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}

// readings is what a read returns.
type readings struct {
	Unfenced int64 `json:"unfenced"`
	Fenced   int64 `json:"fenced"`
}

// request is what every read, write and check names: the client and its
// kind (query), its token and lock name (fence's headers).
type request struct {
	client int
	token  uint64
	kind   Kind
	name   string
}

// parseRequest reads req's request, or answers 400 and returns false.
func parseRequest(w http.ResponseWriter, req *http.Request) (request, bool) {
	var errs []error
	client, err := strconv.Atoi(req.FormValue("client"))
	if err != nil {
		errs = append(errs, fmt.Errorf("%w: client %q is not a number", ErrInvalid, req.FormValue("client")))
	}
	token, err := strconv.ParseUint(req.Header.Get(fence.TokenHeader), 10, 64)
	if err != nil {
		errs = append(errs, fmt.Errorf("%w: %s %q is not a token", ErrInvalid, fence.TokenHeader, req.Header.Get(fence.TokenHeader)))
	}
	name := req.Header.Get(fence.ResourceHeader)
	if name == "" {
		errs = append(errs, fmt.Errorf("%w: no %s header", ErrInvalid, fence.ResourceHeader))
	}
	if err := errors.Join(errs...); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return request{}, false
	}
	return request{client, token, Kind(req.FormValue("kind")), name}, true
}

// call is q's part in the fenced register.
func (q request) call(op string) *fencedCall {
	return &fencedCall{op: op, client: q.client, kind: q.kind}
}

func (r *resource) read(w http.ResponseWriter, req *http.Request) {
	q, ok := parseRequest(w, req)
	if !ok {
		return
	}
	r.mu.Lock()
	var held chan struct{}
	if r.armed && (r.armKind == "" || r.armKind == q.kind) {
		r.armed = false
		held = make(chan struct{})
		r.release = held
		r.out.emit(Event{Client: q.client, Op: OpHeld, Phase: OK, Token: q.token, Kind: q.kind, Name: q.name})
	}
	r.mu.Unlock()
	if held != nil {
		t := time.NewTimer(holdBound)
		select {
		case <-held:
		case <-t.C:
		case <-req.Context().Done():
		}
		t.Stop()
	}
	// Contact: from now on the fenced register refuses lower tokens (a
	// writer's, also lower checks). Both registers are read behind the
	// middleware, at one instant.
	c := q.call(OpRead)
	if code, reason := r.fenced(req, c); code != http.StatusOK {
		http.Error(w, reason, code)
		return
	}
	json.NewEncoder(w).Encode(c.got)
}

// writeResult is what a write or check returns.
type writeResult struct {
	FencedAccepted bool `json:"fenced_accepted"`
	// Refused is the middleware's answer to a refused token (409: the
	// *fence.StaleError's message).
	Refused string `json:"refused,omitempty"`
}

func (r *resource) write(w http.ResponseWriter, req *http.Request) {
	q, ok := parseRequest(w, req)
	if !ok {
		return
	}
	unfenced, err1 := strconv.ParseInt(req.FormValue("unfenced"), 10, 64)
	fenced, err2 := strconv.ParseInt(req.FormValue("fenced"), 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	g := r.regs(q.name)
	stale := q.token < g.unfenced.max
	g.unfenced.value, g.unfenced.applied, g.unfenced.max = unfenced, g.unfenced.applied+1, max(g.unfenced.max, q.token)
	r.out.emit(Event{Client: q.client, Op: OpApply, Phase: OK, Register: "unfenced", Token: q.token,
		Value: unfenced, Accepted: boolp(true), Stale: stale, Kind: q.kind, Name: q.name})
	r.mu.Unlock()
	c := q.call(OpWrite)
	c.value = fenced
	r.answer(w, req, c)
}

// check is a reader's or permit's read-and-check: it writes nothing; the
// fenced register passes it unless a writer with a higher token has made
// contact since (the unfenced register passes everything).
func (r *resource) check(w http.ResponseWriter, req *http.Request) {
	q, ok := parseRequest(w, req)
	if !ok {
		return
	}
	r.out.emit(Event{Client: q.client, Op: OpApply, Phase: OK, Register: "unfenced", Token: q.token,
		Accepted: boolp(true), Stale: q.token < r.store.writerHighest(q.name), Kind: q.kind, Name: q.name, Check: true})
	r.answer(w, req, q.call(OpCheck))
}

// answer passes c through the fenced register and answers whether it was
// accepted: 200 with fenced_accepted, false with fence's reason on a 409.
func (r *resource) answer(w http.ResponseWriter, req *http.Request, c *fencedCall) {
	var res writeResult
	switch code, reason := r.fenced(req, c); code {
	case http.StatusOK:
		res.FencedAccepted = true
	case http.StatusConflict:
		res.Refused = reason
	default:
		http.Error(w, reason, code)
		return
	}
	json.NewEncoder(w).Encode(res)
}

// arm makes the next read (by a worker of the kind given, if any) wait
// until releaseHeld.
func (r *resource) arm(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.armed, r.armKind = true, Kind(req.FormValue("kind"))
	r.mu.Unlock()
}

// releaseHeld lets the held read go.
func (r *resource) releaseHeld(w http.ResponseWriter, _ *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.armed = false
	if r.release != nil {
		close(r.release)
		r.release = nil
	}
}

func (r *resource) state(w http.ResponseWriter, _ *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var st ResourceState
	for _, g := range r.names {
		st.Unfenced += g.unfenced.value
		st.Fenced += g.fenced.value
		st.AppliedUnfenced += g.unfenced.applied
		st.AppliedFenced += g.fenced.applied
	}
	json.NewEncoder(w).Encode(st)
}
