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

// The protected resource: a process of its own holding two counters that
// workers increment inside their critical sections, by reading, sleeping
// and writing the value read plus one, so that lost updates show.
//
//   - The unfenced register takes every write, as most storage does.
//   - The fenced register remembers the highest token it has seen, on a
//     read or a write, and refuses any write with a lower one: a client
//     that lost its lock without knowing is turned away once a newer holder
//     has made contact (the fencing-token scheme).
//
// Every write is logged as an OpApply event, stale when a higher token had
// been seen before it.
type resource struct {
	mu       sync.Mutex
	out      *emitter
	unfenced register
	fenced   register
	// armed makes the next read wait, with its client inside its
	// critical section, until release (or holdBound): how a scenario
	// catches a holder between its grant and its write, for certain.
	armed   bool
	release chan struct{} // closed to let the held read go; nil when none is held
}

// holdBound is the longest a read is held: every wait is bounded.
const holdBound = 3 * time.Minute

type register struct {
	value   int64
	max     uint64 // the highest token seen
	applied int64  // writes taken
}

// ResourceState is the resource's final state.
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
	r := &resource{out: newEmitter(out)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /read", r.read)
	mux.HandleFunc("POST /write", r.write)
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
	r.mu.Lock()
	var held chan struct{}
	if r.armed {
		r.armed = false
		held = make(chan struct{})
		r.release = held
		r.out.emit(Event{Client: client, Op: OpHeld, Phase: OK, Token: token})
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
	// Contact: from now on the fenced register refuses lower tokens.
	r.fenced.max = max(r.fenced.max, token)
	r.out.emit(Event{Client: client, Op: OpSeen, Phase: OK, Token: token})
	got := readings{Unfenced: r.unfenced.value, Fenced: r.fenced.value}
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
	r.mu.Lock()
	t := now()
	stale := token < r.unfenced.max
	r.unfenced.value, r.unfenced.applied, r.unfenced.max = unfenced, r.unfenced.applied+1, max(r.unfenced.max, token)
	r.out.emit(Event{T: t, Client: client, Op: OpApply, Phase: OK, Register: "unfenced", Token: token,
		Value: unfenced, Accepted: boolp(true), Stale: stale})
	fstale := token < r.fenced.max
	if !fstale {
		r.fenced.value, r.fenced.applied, r.fenced.max = fenced, r.fenced.applied+1, token
	}
	r.out.emit(Event{T: t, Client: client, Op: OpApply, Phase: OK, Register: "fenced", Token: token,
		Value: fenced, Accepted: boolp(!fstale), Stale: fstale})
	r.mu.Unlock()
	json.NewEncoder(w).Encode(writeResult{FencedAccepted: !fstale})
}

// arm makes the next read wait until releaseHeld.
func (r *resource) arm(w http.ResponseWriter, _ *http.Request) {
	r.mu.Lock()
	r.armed = true
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
	json.NewEncoder(w).Encode(ResourceState{Unfenced: r.unfenced.value, Fenced: r.fenced.value,
		AppliedUnfenced: r.unfenced.applied, AppliedFenced: r.fenced.applied})
}
