package etcd

import (
	"bytes"
	"strconv"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// claim is what one key under a name claims: its place in line (the
// key's create revision) and the mode and limit its value carries.
//
// A key's value is the identity JSON of its acquisition (Holders), headed
// by the claim: "S" for a reader, "X<n>" for a permit of a semaphore of n,
// "E<n>:<value>" for a candidacy in an election (a mutex carrying a value
// of n bytes: election.go), and nothing for a mutex (a writer), which
// writes what it always wrote. A value without a header is therefore a
// mutex, keys of earlier versions included: a writer of an earlier version
// waits for every key ahead of it, readers too, which keeps the rule. An
// earlier version reads a candidacy as a mutex too, which it is.
type claim struct {
	key   string
	rev   int64
	mode  backends.Mode
	limit int
}

// isMutex reports whether req is a plain mutex (a writer): Exclusive with
// limit 1, the hot path that must stay as it was.
func isMutex(req backends.Request) bool {
	return req.Mode == backends.Exclusive && req.Limit <= 1
}

// claimHeader is the head of a key's value for req.
func claimHeader(req backends.Request) string {
	switch {
	case req.Mode == backends.Shared:
		return "S"
	case req.Limit > 1:
		return "X" + strconv.Itoa(req.Limit)
	case req.Elect:
		return candidacyHeader(req.Value)
	}
	return ""
}

// sharedValue is the value of a reader's key whose identity JSON is ident.
func sharedValue(ident string) string { return "S" + ident }

// parseClaim reads the claim of key (created at rev) from its value.
// Identity JSON begins with '{', so a header never mixes with it; a value
// it cannot read is a mutex, the most exclusive claim.
func parseClaim(key string, rev int64, v []byte) claim {
	c := claim{key: key, rev: rev, mode: backends.Exclusive, limit: 1}
	switch {
	case len(v) > 0 && v[0] == 'S':
		c.mode = backends.Shared
	case len(v) > 1 && v[0] == 'X':
		end := bytes.IndexByte(v, '{')
		if end < 0 {
			end = len(v)
		}
		if n, err := strconv.Atoi(string(v[1:end])); err == nil && n > 1 {
			c.limit = n
		}
	}
	return c
}

// identityOf returns the identity JSON of a value, without its header.
func identityOf(v []byte) []byte {
	if _, ident, ok := candidacy(v); ok {
		return ident // its value may hold a '{'
	}
	if i := bytes.IndexByte(v, '{'); i > 0 {
		return v[i:]
	}
	return v
}

// ahead sums up the keys in line ahead of one key: what backends.Mode's
// rule needs to decide its grant.
type ahead struct {
	n                  int  // keys ahead
	exclusive, shared  bool // some key ahead is Exclusive, or Shared
	minLimit, maxLimit int  // of the keys ahead, a reader counting as 1
}

// add counts c as ahead.
func (a *ahead) add(c claim) {
	if a.n == 0 {
		a.minLimit, a.maxLimit = c.limit, c.limit
	}
	a.n++
	a.minLimit, a.maxLimit = min(a.minLimit, c.limit), max(a.maxLimit, c.limit)
	if c.mode == backends.Shared {
		a.shared = true
	} else {
		a.exclusive = true
	}
}

// admit applies backends.Mode's rule to c, with a the keys ahead of it:
// a limit mismatch with any of them is an error (the first error a
// waiter sees ends its wait); otherwise c holds the name if a reader has
// only readers ahead, or a permit of n (a writer: n = 1) has fewer than
// n keys ahead, none of them a reader.
//
// Keys behind c never count: they came later. Every key counts, held or
// waiting, so the keys that hold a name are always the first in line, and
// all alike (readers, or permits of one limit): a key admitted at one
// revision had only keys like itself ahead, and those ahead only go away
// (or a writer ahead turns reader, which only a reader behind it can
// notice).
func (a ahead) admit(name string, c claim) (bool, error) {
	if a.n > 0 && (a.minLimit != c.limit || a.maxLimit != c.limit) {
		other := a.minLimit
		if other == c.limit {
			other = a.maxLimit
		}
		return false, driverkit.LimitMismatch(name, other, c.limit)
	}
	if c.mode == backends.Shared {
		return !a.exclusive, nil
	}
	return !a.shared && a.n < c.limit, nil
}
