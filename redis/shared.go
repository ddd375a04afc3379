package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/padlock-go/padlock/backends"
)

// Readers and permits live beside the writer's lock key, in the name's
// holds (a sorted set of hold ids by lease expiry, in server milliseconds)
// and tokens (the same ids by fencing token); see scripts/lib.lua. A hold
// id says what it is by a tag at its end, so that every script, and
// Holders, can tell a reader from a permit of n without another key: no
// tag for a writer (a plain Lock's id is what it always was), "/S" for a
// reader, "/X<n>" for a permit of n.

// tag is the kind tag of req's hold ids.
func tag(req backends.Request) string {
	switch {
	case req.Mode == backends.Shared:
		return "/S"
	case req.Limit > 1:
		return "/X" + strconv.Itoa(req.Limit)
	}
	return ""
}

// modeArg is acquire_shared.lua's ARGV[5].
func modeArg(req backends.Request) string {
	if req.Mode == backends.Shared {
		return "S"
	}
	return "X"
}

// kindOf names what req asks for, for errors.
func kindOf(req backends.Request) string {
	switch {
	case req.Mode == backends.Shared:
		return "a reader"
	case req.Limit > 1:
		return fmt.Sprintf("a permit of %d", req.Limit)
	}
	return "the writer"
}

// kindOfID reads a hold id's mode and limit back; inHolds says it is a
// member of holds, where an untagged id is a writer that turned reader.
func kindOfID(id string, inHolds bool) (backends.Mode, int) {
	i := strings.LastIndexByte(id, '/')
	if i < 0 || i < strings.LastIndexByte(id, '|') {
		if inHolds {
			return backends.Shared, 1
		}
		return backends.Exclusive, 1
	}
	t := id[i+1:]
	if j := strings.IndexByte(t, '.'); j >= 0 {
		t = t[:j] // fair mode's ".<lease ms>"
	}
	if n, err := strconv.Atoi(strings.TrimPrefix(t, "X")); strings.HasPrefix(t, "X") && err == nil {
		return backends.Exclusive, n
	}
	return backends.Shared, 1
}

// Share turns a writer into a reader in place (share.lua): its id moves
// from the lock key to the readers with its token, its lease counted
// again from now, and readers waiting behind it may come in. Run again
// after a lost answer, it finds the hold a reader already and renews it.
func (h *hold) Share(ctx context.Context) (backends.Grant, error) {
	sent := time.Now()
	n, err := shareScript.Run(ctx, h.c, h.keys.acquire(), h.id, h.ttl.Milliseconds(), h.token, h.keys.channel).Int()
	if err != nil {
		return backends.Grant{}, requestError(ctx, "redis share", err)
	}
	if n == 0 {
		return backends.Grant{}, h.gone()
	}
	return backends.Grant{Sent: sent, TTL: h.ttl}, nil
}
