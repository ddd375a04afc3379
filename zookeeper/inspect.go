package zookeeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// nodeData is a queue node's data: the lock's name (a hashed path segment
// cannot be read back) and its creator's identity, for Holders.
type nodeData struct {
	Name string `json:"name"`
	// Mode is "shared" once a writer has turned into a reader in place
	// (Share); empty otherwise, the kind being in the node's name.
	Mode string `json:"mode,omitempty"`
	// Elect, Value and RawValue are a candidacy's (election.go); a
	// mutex's node has none of them, so its data is what it always was.
	Elect bool   `json:"elect,omitempty"`
	Value string `json:"value,omitempty"`
	// RawValue is a Value that is not valid UTF-8, which a JSON string
	// cannot carry byte for byte.
	RawValue []byte `json:"raw_value,omitempty"`
	backends.Identity
}

func nodeValue(req backends.Request) []byte {
	nd := nodeData{Name: req.Name, Identity: driverkit.IdentityOf(req)}
	if req.Elect {
		nd.Elect = true
		nd.setValue(req.Value)
	}
	b, _ := json.Marshal(nd)
	return b
}

// anySession returns a live session to read with: one the driver has, or a
// new one with the driver's own timeout.
func (d *driver) anySession(ctx context.Context) (*session, error) {
	ss := &d.sessions
	ss.mu.Lock()
	for _, s := range ss.all {
		if s.alive() {
			ss.mu.Unlock()
			return s, nil
		}
	}
	ss.mu.Unlock()
	return d.session(ctx, ownSessionTimeout)
}

// Holders reads the holds of every queue under the root: a writer, or
// its readers, or its permits (holdsOf).
func (d *driver) Holders(ctx context.Context, prefix string) ([]backends.Holder, error) {
	s, err := d.anySession(ctx)
	if err != nil {
		return nil, err
	}
	segs, err := call(ctx, s, "list names", func() ([]string, error) {
		if _, err := s.conn.Sync(d.root); err != nil { // read what the leader has
			return nil, err
		}
		kids, _, err := s.conn.Children(d.root)
		return kids, err
	})
	if err != nil {
		return nil, err
	}
	var out []backends.Holder
	for _, seg := range segs {
		if seg == forcedChild {
			continue // the records of forced releases
		}
		hs, err := d.holdsOf(ctx, s, d.root+"/"+seg)
		if err != nil {
			return nil, err
		}
		if len(hs) > 0 && strings.HasPrefix(hs[0].Name, prefix) {
			out = append(out, hs...)
		}
	}
	slices.SortStableFunc(out, func(a, b backends.Holder) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// holdsOf describes the holds of the queue under parent, in token order:
// the entries that backends.Mode's rule grants, as waitTurn applies it.
func (d *driver) holdsOf(ctx context.Context, s *session, parent string) ([]backends.Holder, error) {
	for range 5 {
		hs, err := d.holdsOnce(ctx, s, parent)
		if !errors.Is(err, zk.ErrNoNode) {
			return hs, err
		}
		// A node was released between the listing and its read: the
		// holds have changed.
	}
	return nil, driverkit.Unavailable("zookeeper holders", fmt.Errorf("the queue under %s keeps changing", parent))
}

func (d *driver) holdsOnce(ctx context.Context, s *session, parent string) ([]backends.Holder, error) {
	kids, err := call(ctx, s, "list queue", func() ([]string, error) {
		kids, _, err := s.conn.Children(parent)
		return kids, err
	})
	if errors.Is(err, zk.ErrNoNode) || (err == nil && len(kids) == 0) {
		return nil, nil // an empty container, or one removed meanwhile
	}
	if err != nil {
		return nil, err
	}
	slices.SortFunc(kids, func(a, b string) int { return strings.Compare(seq(a), seq(b)) })
	// Walk the line from its head, reading each node, until the first
	// that the rule does not grant: a writer holds only as the head (and
	// then alone, unless it turned into a reader); readers up to the
	// first writer behind the head; permits of n, the first n.
	var out []backends.Holder
	for i, kid := range kids {
		k := parseKind(kid)
		if k.mode == backends.Exclusive && i >= k.limit {
			break
		}
		if i > 0 && k.limit != parseKind(kids[0]).limit {
			break // an acquisition with another limit, about to fail
		}
		h, err := d.readHolder(ctx, s, parent+"/"+kid, k)
		if err != nil {
			return nil, err
		}
		out = append(out, h)
		if h.Mode == backends.Exclusive && h.Limit == 1 {
			break // a writer holds alone
		}
	}
	for i := range out {
		out[i].Waiters = len(kids) - len(out)
	}
	return out, nil
}

// readHolder reads the queue node at path, of kind k.
func (d *driver) readHolder(ctx context.Context, s *session, path string, k kind) (backends.Holder, error) {
	type read struct {
		data []byte
		stat *zk.Stat
	}
	r, err := call(ctx, s, "read holder", func() (read, error) {
		data, stat, err := s.conn.Get(path)
		return read{data, stat}, err
	})
	if err != nil {
		return backends.Holder{}, err
	}
	var nd nodeData
	_ = json.Unmarshal(r.data, &nd)
	h := backends.Holder{Name: nd.Name, Token: uint64(r.stat.Czxid), ID: path,
		Host: nd.Host, PID: nd.PID, Owner: nd.Owner, Mode: k.mode, Limit: k.limit,
		Elect: nd.Elect, Value: nd.value()}
	if nd.Mode == modeShared {
		h.Mode = backends.Shared
	}
	if nd.At > 0 {
		h.Since = time.UnixMilli(nd.At)
	}
	return h, nil
}

// ForceRelease deletes every hold of name's queue (a writer, or all its
// readers or permits), recording each release in the same multi-op
// (forceDelete), and returns the oldest. Sequential nodes are never
// re-created under the same path, so the delete can only remove the holds
// it read. Their holders learn at once (their nodes' watches) or at their
// next renewal.
func (d *driver) ForceRelease(ctx context.Context, name string) (backends.Holder, error) {
	s, err := d.anySession(ctx)
	if err != nil {
		return backends.Holder{}, err
	}
	if err := do(ctx, s, "sync", func() error { _, err := s.conn.Sync(d.root); return err }); err != nil {
		return backends.Holder{}, err
	}
	hs, err := d.holdsOf(ctx, s, d.root+"/"+segment(name))
	if err != nil {
		return backends.Holder{}, err
	}
	if len(hs) == 0 {
		return backends.Holder{}, fmt.Errorf("%w: nobody holds %q", backends.ErrNotHeld, name)
	}
	for range 5 {
		err = d.forceDelete(ctx, s, hs)
		if errors.Is(err, zk.ErrNoNode) {
			// One of them was released meanwhile: the multi-op deleted
			// none. Force those of the holds read that are still there,
			// never a hold granted since (reading the queue again took
			// the name from whoever the release handed it to).
			if hs, err = d.stillThere(ctx, s, hs); err != nil {
				return backends.Holder{}, err
			}
			if len(hs) == 0 {
				return backends.Holder{}, fmt.Errorf("%w: %q was released while it was being forced", backends.ErrNotHeld, name)
			}
			continue
		}
		if err != nil {
			return backends.Holder{}, err
		}
		return hs[0], nil
	}
	return backends.Holder{}, driverkit.Unavailable("zookeeper force release", fmt.Errorf("the holds of %q keep changing", name))
}

// stillThere returns those of hs whose nodes still exist (no watch set).
func (d *driver) stillThere(ctx context.Context, s *session, hs []backends.Holder) ([]backends.Holder, error) {
	var out []backends.Holder
	for _, h := range hs {
		ok, err := call(ctx, s, "look at a hold", func() (bool, error) {
			ok, _, err := s.conn.Exists(h.ID)
			return ok, err
		})
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, h)
		}
	}
	return out, nil
}
