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
)

// The protected resource: a process of its own holding, per lock name, two
// counters that workers increment inside their critical sections, by
// reading, sleeping and writing the value read plus one, so that lost
// updates show.
//
//   - The unfenced register takes every write, as most storage does.
//   - The fenced register remembers the highest token it has seen, on a
//     read or a write, and refuses any write with a lower one: a client
//     that lost its lock without knowing is turned away once a newer holder
//     has made contact (the fencing-token scheme).
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
	max     uint64 // the highest token seen
	wmax    uint64 // the highest token a writer has shown: checks below it are refused
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

func (r *resource) read(w http.ResponseWriter, req *http.Request) {
	client, _ := strconv.Atoi(req.FormValue("client"))
	token, _ := strconv.ParseUint(req.FormValue("token"), 10, 64)
	kind, name := Kind(req.FormValue("kind")), req.FormValue("name")
	r.mu.Lock()
	var held chan struct{}
	if r.armed && (r.armKind == "" || r.armKind == kind) {
		r.armed = false
		held = make(chan struct{})
		r.release = held
		r.out.emit(Event{Client: client, Op: OpHeld, Phase: OK, Token: token, Kind: kind, Name: name})
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
	r.mu.Lock()
	// Contact: from now on the fenced register refuses lower tokens (a
	// writer's, also lower checks).
	g := r.regs(name)
	g.fenced.max = max(g.fenced.max, token)
	if kind.writes() {
		g.fenced.wmax = max(g.fenced.wmax, token)
	}
	r.out.emit(Event{Client: client, Op: OpSeen, Phase: OK, Token: token, Kind: kind, Name: name})
	got := readings{Unfenced: g.unfenced.value, Fenced: g.fenced.value}
	r.mu.Unlock()
	json.NewEncoder(w).Encode(got)
}

// writeResult is what a write returns.
type writeResult struct {
	FencedAccepted bool `json:"fenced_accepted"`
}

func (r *resource) write(w http.ResponseWriter, req *http.Request) {
	client, _ := strconv.Atoi(req.FormValue("client"))
	token, err1 := strconv.ParseUint(req.FormValue("token"), 10, 64)
	unfenced, err2 := strconv.ParseInt(req.FormValue("unfenced"), 10, 64)
	fenced, err3 := strconv.ParseInt(req.FormValue("fenced"), 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	kind, name := Kind(req.FormValue("kind")), req.FormValue("name")
	r.mu.Lock()
	g := r.regs(name)
	t := now()
	stale := token < g.unfenced.max
	g.unfenced.value, g.unfenced.applied, g.unfenced.max = unfenced, g.unfenced.applied+1, max(g.unfenced.max, token)
	r.out.emit(Event{T: t, Client: client, Op: OpApply, Phase: OK, Register: "unfenced", Token: token,
		Value: unfenced, Accepted: boolp(true), Stale: stale, Kind: kind, Name: name})
	fstale := token < g.fenced.max
	if !fstale {
		g.fenced.value, g.fenced.applied, g.fenced.max = fenced, g.fenced.applied+1, token
		g.fenced.wmax = max(g.fenced.wmax, token)
	}
	r.out.emit(Event{T: t, Client: client, Op: OpApply, Phase: OK, Register: "fenced", Token: token,
		Value: fenced, Accepted: boolp(!fstale), Stale: fstale, Kind: kind, Name: name})
	r.mu.Unlock()
	json.NewEncoder(w).Encode(writeResult{FencedAccepted: !fstale})
}

// check is a reader's or permit's read-and-check: it writes nothing; the
// fenced register passes it unless a writer with a higher token has made
// contact since (the unfenced register passes everything).
func (r *resource) check(w http.ResponseWriter, req *http.Request) {
	client, _ := strconv.Atoi(req.FormValue("client"))
	token, err := strconv.ParseUint(req.FormValue("token"), 10, 64)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	kind, name := Kind(req.FormValue("kind")), req.FormValue("name")
	r.mu.Lock()
	g := r.regs(name)
	t := now()
	r.out.emit(Event{T: t, Client: client, Op: OpApply, Phase: OK, Register: "unfenced", Token: token,
		Accepted: boolp(true), Stale: token < g.fenced.wmax, Kind: kind, Name: name, Check: true})
	fstale := token < g.fenced.wmax
	r.out.emit(Event{T: t, Client: client, Op: OpApply, Phase: OK, Register: "fenced", Token: token,
		Accepted: boolp(!fstale), Stale: fstale, Kind: kind, Name: name, Check: true})
	r.mu.Unlock()
	json.NewEncoder(w).Encode(writeResult{FencedAccepted: !fstale})
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
