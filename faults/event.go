package faults

import (
	"encoding/json"
	"io"
	"sync"
)

// Ops of a history. Each client op is invoked, then completes ok, fails
// (it did not happen) or is info (it may or may not have happened).
const (
	OpAcquire = "acquire"
	OpRelease = "release"
	OpRead    = "read"
	OpWrite   = "write"
	OpCheck   = "check" // a reader's or permit's: its token checked against the resource, which it does not write
	OpLost    = "lost"  // a held lock's Done closed with an error
	OpFault   = "fault" // the orchestrator's: a fault's start (invoke) and end (ok)
	OpApply   = "apply" // the resource's: a write it applied or refused (or, with Check, a check it passed or failed)
	OpSeen    = "seen"  // the resource's: a read, whose token the fenced register now knows
	OpHeld    = "held"  // the resource's: an armed read, held with its client inside its critical section
	OpExit    = "exit"  // the orchestrator's: a worker process ended
	OpStall   = "stall" // a worker's: its process ran nothing of its own for Stall (see stallProbe)
)

// Phases of an op.
const (
	Invoke = "invoke"
	OK     = "ok"
	Fail   = "fail"
	Info   = "info"
)

// Event is one entry of a history.
type Event struct {
	T      int64  `json:"t"` // now(), nanoseconds
	Client int    `json:"client"`
	Op     string `json:"op"`
	Phase  string `json:"phase"`
	Token  uint64 `json:"token,omitempty"`
	// Kind: the kind of the client's hold (acquire, release, lost; the
	// resource's seen, apply), "" for a writer.
	Kind Kind `json:"kind,omitempty"`
	// Name: the lock name (acquire, release, lost; the resource's
	// events), "" for the one name of a mutex cell ("hot").
	Name string `json:"name,omitempty"`
	// Check: an OpApply that was a reader's or permit's check, which
	// writes nothing.
	Check bool `json:"check,omitempty"`
	// Value: a read's or write's counter value (the unfenced register).
	Value int64 `json:"value,omitempty"`
	// Accepted: whether the resource took a write (OpWrite ok, OpApply).
	Accepted *bool `json:"accepted,omitempty"`
	// Stale: the resource saw a higher token before this write.
	Stale bool `json:"stale,omitempty"`
	// Register: OpApply's register, "fenced" or "unfenced".
	Register string `json:"register,omitempty"`
	// Fault: OpFault's kind.
	Fault string `json:"fault,omitempty"`
	// Stall: OpStall's length in nanoseconds, ending at T.
	Stall int64  `json:"stall_ns,omitempty"`
	Err   string `json:"err,omitempty"`
}

// emitter writes events as JSON lines, from any goroutine.
type emitter struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func newEmitter(w io.Writer) *emitter { return &emitter{enc: json.NewEncoder(w)} }

func (e *emitter) emit(ev Event) {
	if ev.T == 0 {
		ev.T = now()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.enc.Encode(ev)
}

func boolp(b bool) *bool { return &b }
