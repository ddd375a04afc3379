package zookeeper

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// kind is what a queue node claims on its name: its mode and limit
// (backends.Mode's rule). It is written in the node's name, before the
// sequence number, so that one getChildren shows every entry's kind and
// limit without reading a node:
//
//	_c_<id>-lock-<seq>        a writer, or a mutex (Exclusive, limit 1): today's name, unchanged
//	_c_<id>-read-<seq>        a reader (Shared), Curator's __READ__ node in padlock's layout
//	_c_<id>-permit-<n>-<seq>  a permit of a semaphore of n (Exclusive, limit n > 1)
//
// A writer that turned into a reader in place (Share) keeps its name, and
// its place in line; its data says so (nodeData.Mode).
type kind struct {
	mode  backends.Mode
	limit int
}

// writer is the kind of a mutex or a writer, and of any node whose name
// padlock does not know: it counts as Exclusive, the safe reading.
var writer = kind{backends.Exclusive, 1}

// kindOf is the kind a request claims.
func kindOf(req backends.Request) kind {
	if req.Mode == backends.Shared {
		return kind{backends.Shared, 1}
	}
	return kind{backends.Exclusive, max(req.Limit, 1)}
}

// label is the part of a node's name that says its kind, after the
// protected create's id.
func (k kind) label() string {
	switch {
	case k.mode == backends.Shared:
		return readLabel
	case k.limit > 1:
		return permitLabel + strconv.Itoa(k.limit) + "-"
	}
	return nodePrefix
}

const (
	readLabel   = "read-"
	permitLabel = "permit-"
)

// parseKind reads a queue node's kind from its name.
func parseKind(child string) kind {
	rest := strings.TrimSuffix(child, seq(child)) // "..._c_<id>-permit-3-"
	if strings.HasSuffix(rest, "-"+readLabel) || rest == readLabel {
		return kind{backends.Shared, 1}
	}
	body := strings.TrimSuffix(rest, "-") // "..._c_<id>-permit-3"
	if i := strings.LastIndexByte(body, '-'); i > 0 && strings.HasSuffix(body[:i+1], permitLabel) {
		if n, err := strconv.Atoi(body[i+1:]); err == nil && n > 1 {
			return kind{backends.Exclusive, n}
		}
	}
	return writer
}

// mismatch returns the error for a request of kind k on name whose limit
// differs from that of one of the entries ahead of it (or of every entry,
// for a TryLock that did not queue), or nil. Entries behind it check
// themselves against it: an entry's kind never changes its limit, and no
// entry is ever made ahead of one that exists, so the first look decides.
func (k kind) mismatch(name string, ahead []string) error {
	for _, a := range ahead {
		if o := parseKind(a); o.limit != k.limit {
			return driverkit.LimitMismatch(name, o.limit, k.limit)
		}
	}
	return nil
}

// writers returns the Exclusive entries among kids, in their order.
func writers(kids []string) []string {
	var out []string
	for _, k := range kids {
		if parseKind(k).mode == backends.Exclusive {
			out = append(out, k)
		}
	}
	return out
}

// modeShared is nodeData.Mode of a writer that turned into a reader.
const modeShared = "shared"

// shared reports whether a node's data marks a writer turned reader.
func shared(data []byte) bool {
	var nd nodeData
	return json.Unmarshal(data, &nd) == nil && nd.Mode == modeShared
}
