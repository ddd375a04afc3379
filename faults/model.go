package faults

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// The lock's sequential specification, for porcupine: tokens strictly
// increase in the order grants take effect, and a release that succeeds is
// that of a current hold. Leases may lapse, so a grant while another
// client holds is allowed here; whether two clients were ever inside at
// once is the overlap check's question, which knows the faults and TTLs.
//
// The recipes extend it only where they must: the state is the set of
// current holds rather than one. A writer's grant (the mutex, a leader, a
// multi-lock's name) replaces the set with itself, as the mutex's model
// did with its one holder (whoever held has lapsed); a reader's grant
// removes the writers (lapsed) and joins the readers; a permit's joins the
// permits (which lapsed, the limit check knows). Each name is a model of
// its own (Partition): a multi-lock's two names, two histories.

// lockState is the model's state: the current holds, encoded sorted as
// "client:token:w|s" (comparable, for porcupine), and the highest token
// granted.
type lockState struct {
	holds string
	max   uint64
}

// lockInput is an operation: an acquire by client of name, as kind, or a
// release of its hold with token.
type lockInput struct {
	release bool
	client  int
	token   uint64
	name    string
	kind    Kind
}

// lockOutput is an operation's answer: ok, failed (it did not happen), or
// unknown (it may have); an acquire that is ok returns its token.
type lockOutput struct {
	ok, unknown bool
	token       uint64
}

// holdEntry is one current hold of a lockState.
type holdEntry struct {
	client int
	token  uint64
	shared bool
}

func (e holdEntry) String() string {
	m := "w"
	if e.shared {
		m = "s"
	}
	return fmt.Sprintf("%d:%d:%s", e.client, e.token, m)
}

func parseHolds(s string) []holdEntry {
	var out []holdEntry
	for _, f := range strings.Split(s, ",") {
		var e holdEntry
		var m string
		if f == "" {
			continue
		}
		fmt.Sscanf(strings.ReplaceAll(f, ":", " "), "%d %d %s", &e.client, &e.token, &m)
		e.shared = m == "s"
		out = append(out, e)
	}
	return out
}

func formatHolds(hs []holdEntry) string {
	var fs []string
	for _, h := range hs {
		fs = append(fs, h.String())
	}
	slices.Sort(fs)
	return strings.Join(fs, ",")
}

// lockModel is the model porcupine checks a cell's history against.
var lockModel = porcupine.Model{
	Partition: func(ops []porcupine.Operation) [][]porcupine.Operation {
		var out [][]porcupine.Operation
		byName := map[string]int{}
		for _, op := range ops {
			n := op.Input.(lockInput).name
			i, ok := byName[n]
			if !ok {
				i = len(out)
				byName[n] = i
				out = append(out, nil)
			}
			out[i] = append(out[i], op)
		}
		return out
	},
	Init: func() any { return lockState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(lockState), input.(lockInput), output.(lockOutput)
		hs := parseHolds(s.holds)
		switch {
		case out.unknown || !out.ok:
			// Not known to have happened. An unanswered acquire may have
			// taken the lock with a token nobody saw: accept it either
			// way (leniently; the overlap check still sees its effects).
			return true, s
		case !in.release:
			if out.token <= s.max {
				return false, s
			}
			me := holdEntry{client: in.client, token: out.token, shared: !in.kind.exclusive()}
			switch {
			case !me.shared:
				hs = nil
			default: // lapsed writers go; readers (or permits) share
				hs = slices.DeleteFunc(hs, func(h holdEntry) bool { return !h.shared })
			}
			return true, lockState{holds: formatHolds(append(hs, me)), max: out.token}
		default:
			i := slices.IndexFunc(hs, func(h holdEntry) bool { return h.client == in.client && h.token == in.token })
			if i < 0 {
				return false, s
			}
			s.holds = formatHolds(slices.Delete(hs, i, i+1))
			return true, s
		}
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(lockInput), output.(lockOutput)
		result := "ok"
		switch {
		case out.unknown:
			result = "?"
		case !out.ok:
			result = "fail"
		case !in.release:
			result = fmt.Sprint(out.token)
		}
		what := ""
		if in.kind != "" && in.kind != Writer {
			what = string(in.kind) + " "
		}
		if in.name != "" {
			what += in.name + " "
		}
		if in.release {
			return fmt.Sprintf("release %s(%d) → %s", what, in.token, result)
		}
		return "acquire " + what + "→ " + result
	},
	DescribeState: func(state any) string {
		s := state.(lockState)
		if s.holds == "" {
			return fmt.Sprintf("free (max %d)", s.max)
		}
		return fmt.Sprintf("held by %s (client:token)", s.holds)
	},
}

// lockOperations turns a history's acquires and releases into porcupine
// operations. One still unanswered at the end (a killed worker's, or a
// stopped run's) never returns.
func lockOperations(evs []Event) []porcupine.Operation {
	type key struct {
		client int
		op     string
		name   string
	}
	var ops []porcupine.Operation
	open := map[key]int{} // the op's index in ops
	for _, e := range evs {
		if e.Op != OpAcquire && e.Op != OpRelease {
			continue
		}
		k := key{e.Client, e.Op, e.Name}
		in := lockInput{release: e.Op == OpRelease, client: e.Client, token: e.Token, name: e.Name, kind: e.Kind}
		if e.Phase == Invoke {
			open[k] = len(ops)
			ops = append(ops, porcupine.Operation{ClientId: e.Client, Call: e.T, Return: noReturn,
				Input: in, Output: lockOutput{unknown: true}})
			continue
		}
		i, ok := open[k]
		if !ok { // an answer without its call: take it as instant
			i = len(ops)
			ops = append(ops, porcupine.Operation{ClientId: e.Client, Call: e.T, Input: in})
		}
		delete(open, k)
		ops[i].Return = e.T
		ops[i].Output = lockOutput{ok: e.Phase == OK, unknown: e.Phase == Info, token: e.Token}
	}
	return ops
}

// noReturn is the return time of an op that never returned.
const noReturn = int64(1<<63 - 1)

// linearizeTimeout bounds porcupine's search; a cell's history is short
// and mostly sequential, so this is far more than it needs.
const linearizeTimeout = time.Minute

// checkTokens checks a history's acquires and releases against lockModel:
// "ok", "illegal" (no order of them is possible) or "unknown" (the search
// timed out); with illegal, info shows why.
func checkTokens(evs []Event) (string, porcupine.LinearizationInfo) {
	ops := lockOperations(evs)
	res, info := porcupine.CheckOperationsVerbose(lockModel, ops, linearizeTimeout)
	switch res {
	case porcupine.Ok:
		return "ok", info
	case porcupine.Illegal:
		return "illegal", info
	}
	return "unknown", info
}

// faultAnnotations marks a history's faults for porcupine's visualisation.
func faultAnnotations(evs []Event) []porcupine.Annotation {
	var out []porcupine.Annotation
	for i, f := range evs {
		if f.Op != OpFault || f.Phase != Invoke {
			continue
		}
		end := f.T
		if j := slices.IndexFunc(evs[i+1:], func(e Event) bool {
			return e.Op == OpFault && e.Phase == OK && e.Fault == f.Fault && e.Client == f.Client
		}); j >= 0 {
			end = evs[i+1+j].T
		}
		out = append(out, porcupine.Annotation{ClientId: f.Client, Start: f.T, End: end, Description: f.Fault,
			Details: fmt.Sprintf("%s aimed at client %d, token %d", f.Fault, f.Client, f.Token), BackgroundColor: "#f6c8c8"})
	}
	for _, e := range evs {
		if e.Op == OpLost {
			out = append(out, porcupine.Annotation{ClientId: e.Client, Start: e.T, Description: "Done",
				Details: fmt.Sprintf("lost token %d: %s", e.Token, e.Err), BackgroundColor: "#fbe3a8"})
		}
	}
	slices.SortFunc(out, func(a, b porcupine.Annotation) int { return cmp.Compare(a.Start, b.Start) })
	return out
}

// writeVisual writes porcupine's HTML account of a history that failed
// lockModel to path, with the history's faults and losses marked.
func writeVisual(path string, evs []Event, lin porcupine.LinearizationInfo) error {
	lin.AddAnnotations(faultAnnotations(evs))
	return porcupine.VisualizePath(lockModel, lin, path)
}
