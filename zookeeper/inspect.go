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
	backends.Identity
}

func nodeValue(req backends.Request) []byte {
	b, _ := json.Marshal(nodeData{Name: req.Name, Identity: driverkit.IdentityOf(req)})
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

// Holders reads the lowest node of every queue under the root: its holder.
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
		h, ok, err := d.head(ctx, s, d.root+"/"+seg)
		if err != nil {
			return nil, err
		}
		if ok && strings.HasPrefix(h.Name, prefix) {
			out = append(out, h)
		}
	}
	slices.SortFunc(out, func(a, b backends.Holder) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// head describes the holder of the queue under parent: its lowest node.
// ok is false for an empty queue.
func (d *driver) head(ctx context.Context, s *session, parent string) (h backends.Holder, ok bool, err error) {
	for range 5 {
		h, ok, err = d.headOnce(ctx, s, parent)
		if !errors.Is(err, zk.ErrNoNode) {
			return h, ok, err
		}
		// The head was released between the listing and the read: the
		// next one holds now.
	}
	return h, false, driverkit.Unavailable("zookeeper holders", fmt.Errorf("the queue under %s keeps changing", parent))
}

func (d *driver) headOnce(ctx context.Context, s *session, parent string) (h backends.Holder, ok bool, err error) {
	kids, err := call(ctx, s, "list queue", func() ([]string, error) {
		kids, _, err := s.conn.Children(parent)
		return kids, err
	})
	if errors.Is(err, zk.ErrNoNode) || (err == nil && len(kids) == 0) {
		return h, false, nil // an empty container, or one removed meanwhile
	}
	if err != nil {
		return h, false, err
	}
	slices.SortFunc(kids, func(a, b string) int { return strings.Compare(seq(a), seq(b)) })
	path := parent + "/" + kids[0]
	type read struct {
		data []byte
		stat *zk.Stat
	}
	r, err := call(ctx, s, "read holder", func() (read, error) {
		data, stat, err := s.conn.Get(path)
		return read{data, stat}, err
	})
	if err != nil {
		return h, false, err
	}
	var nd nodeData
	_ = json.Unmarshal(r.data, &nd)
	h = backends.Holder{Name: nd.Name, Token: uint64(r.stat.Czxid), ID: path,
		Host: nd.Host, PID: nd.PID, Owner: nd.Owner, Waiters: len(kids) - 1}
	if nd.At > 0 {
		h.Since = time.UnixMilli(nd.At)
	}
	return h, true, nil
}

// ForceRelease deletes the lowest node of name's queue, recording the
// release in the same multi-op (forceDelete). Sequential nodes are never
// re-created under the same path, so the delete can only remove the holder
// it read. Its holder's next renewal finds the node gone.
func (d *driver) ForceRelease(ctx context.Context, name string) (backends.Holder, error) {
	s, err := d.anySession(ctx)
	if err != nil {
		return backends.Holder{}, err
	}
	if err := do(ctx, s, "sync", func() error { _, err := s.conn.Sync(d.root); return err }); err != nil {
		return backends.Holder{}, err
	}
	h, ok, err := d.head(ctx, s, d.root+"/"+segment(name))
	if err != nil {
		return backends.Holder{}, err
	}
	if !ok {
		return backends.Holder{}, fmt.Errorf("%w: nobody holds %q", backends.ErrNotHeld, name)
	}
	err = d.forceDelete(ctx, s, h)
	if errors.Is(err, zk.ErrNoNode) {
		return backends.Holder{}, fmt.Errorf("%w: %q changed hands meanwhile (token %d released)", backends.ErrNotHeld, name, h.Token)
	}
	if err != nil {
		return backends.Holder{}, err
	}
	return h, nil
}
