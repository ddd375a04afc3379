package zookeeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/go-zookeeper/zk"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// A candidacy is a writer's queue node (kinds.go) whose data says so
// (nodeData.Elect) and carries its value, written by the create that
// queues it: the moment the node is the lowest, its value is there to
// read. The leader is the lowest node of the name when that node is a
// candidacy; its czxid is the term's token. Proclaim rewrites the node's
// data; Watch (watch.go) pushes changes to Observe.

// setValue stores v in the node data, as a JSON string when it is valid
// UTF-8 (readable with zkCli), else as bytes.
func (nd *nodeData) setValue(v string) {
	nd.Value, nd.RawValue = "", nil
	if utf8.ValidString(v) {
		nd.Value = v
	} else {
		nd.RawValue = []byte(v)
	}
}

// value is the value setValue stored.
func (nd *nodeData) value() string {
	if nd.RawValue != nil {
		return string(nd.RawValue)
	}
	return nd.Value
}

// Leader syncs the session's server with the ensemble's leader, then reads
// the name's lowest queue node: the holder. It is the leader if it is a
// candidacy. A node of this driver's own abandoned acquisitions (doomed)
// was never granted: no leader while it heads the queue.
func (d *driver) Leader(ctx context.Context, name string) (backends.Leader, bool, error) {
	s, err := d.anySession(ctx)
	if err != nil {
		return backends.Leader{}, false, err
	}
	parent := d.root + "/" + segment(name)
	type read struct {
		ld backends.Leader
		ok bool
	}
	r, err := call(ctx, s, "read leader", func() (read, error) {
		if _, err := s.conn.Sync(d.root); err != nil { // read what the leader has
			return read{}, err
		}
		for range 5 {
			kids, _, err := s.conn.Children(parent)
			if errors.Is(err, zk.ErrNoNode) || (err == nil && len(kids) == 0) {
				return read{}, nil // no name, or an empty container
			}
			if err != nil {
				return read{}, err
			}
			head := parent + "/" + lowest(kids)
			if _, doomed := d.doomed.Load(head); doomed {
				return read{}, nil
			}
			data, st, err := s.conn.Get(head)
			if errors.Is(err, zk.ErrNoNode) {
				continue // released between the list and the read: list again
			}
			if err != nil {
				return read{}, err
			}
			var nd nodeData
			if json.Unmarshal(data, &nd) != nil || !nd.Elect {
				return read{}, nil // a plain lock holds the name
			}
			return read{backends.Leader{Value: nd.value(), Token: uint64(st.Czxid)}, true}, nil
		}
		return read{}, driverkit.Unavailable("zookeeper leader", fmt.Errorf("the queue under %s keeps changing", parent))
	})
	return r.ld, r.ok, err
}

// lowest is the node of kids with the lowest sequence number: the holder
// of a writer's queue.
func lowest(kids []string) string {
	return slices.MinFunc(kids, func(a, b string) int { return strings.Compare(seq(a), seq(b)) })
}

// Proclaim replaces the candidacy's value: one setData on its own node,
// with the data version this hold last wrote. The node exists exactly
// while this hold holds (a sequential node's path is never made again, and
// it is deleted on release, forced release or the session's expiry), so a
// deposed leader's write finds no node and changes nothing: ErrNotHeld.
// The session, the lease, is untouched.
//
// The version orders this hold's own writes. After a Proclaim whose
// answer was lost, which may still be applied, the next one carries the
// same version: at most one of them is applied with it. If the lost one
// won (ErrBadVersion: only this hold writes its node), the next reads the
// version it made and writes over it, so the last Proclaim to return nil
// is the value that stands.
func (h *hold) Proclaim(ctx context.Context, value string) error {
	if h.lost.Err() != nil {
		return fmt.Errorf("%w: zookeeper node %s: %w", backends.ErrNotHeld, h.path, context.Cause(h.lost))
	}
	var nd nodeData
	if err := json.Unmarshal(h.data, &nd); err != nil {
		return fmt.Errorf("zookeeper: a node's own data does not parse: %w", err)
	}
	nd.setValue(value)
	data, err := json.Marshal(nd)
	if err != nil {
		return err
	}
	// The change fires the watch that tells the hold its node was
	// deleted (every watch fires once): it is set again below, or by
	// the next Renew.
	h.rearm.Store(true)
	st, err := call(ctx, h.s, "proclaim", func() (*zk.Stat, error) {
		st, err := h.s.conn.Set(h.path, data, h.version)
		if !errors.Is(err, zk.ErrBadVersion) {
			return st, err
		}
		_, now, err := h.s.conn.Get(h.path)
		if err != nil {
			return nil, err
		}
		return h.s.conn.Set(h.path, data, now.Version)
	})
	switch {
	case errors.Is(err, zk.ErrNoNode), errors.Is(err, errSessionExpired):
		return fmt.Errorf("%w: zookeeper node %s is gone: %w", backends.ErrNotHeld, h.path, err)
	case errors.Is(err, zk.ErrBadVersion):
		return driverkit.Unavailable("zookeeper proclaim", fmt.Errorf("node %s changed twice under one write: %w", h.path, err))
	case err != nil:
		return err
	}
	h.version, h.data = st.Version, data
	// Watch the node again at once, so that its deletion still reaches
	// the hold without waiting for the next renewal. The value is
	// written whatever this says; a failure leaves it to Renew.
	_ = h.watchAgain(ctx)
	return nil
}
