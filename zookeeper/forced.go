package zookeeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

var _ backends.ForcedLister = (*driver)(nil)

// forcedChild is the child of the root that keeps the records of forced
// releases: root/forced/<unix ms>-<segment>-<token>, each holding the
// record as JSON. No lock segment is called that (they begin "k-" or
// "h-"), and Holders skips it. It is a container: the server removes it
// once ForceRelease has pruned its last record.
const forcedChild = "forced"

func (d *driver) forcedDir() string { return d.root + "/" + forcedChild }

// forceDelete deletes the holds' nodes (their IDs) and creates the
// record of each one's forced release, in one multi-op: whoever sees a
// node gone can see why. It returns zk.ErrNoNode if one of the nodes was
// gone already (then nothing was deleted).
func (d *driver) forceDelete(ctx context.Context, s *session, hs []backends.Holder) error {
	now := time.Now()
	ops := make([]any, 0, 2*len(hs))
	for _, h := range hs {
		data, _ := json.Marshal(backends.ForcedRelease{Name: h.Name, Token: h.Token, ID: h.ID, At: now})
		record := fmt.Sprintf("%s/%d-%s-%d", d.forcedDir(), now.UnixMilli(), segment(h.Name), h.Token)
		ops = append(ops, &zk.DeleteRequest{Path: h.ID, Version: -1}, &zk.CreateRequest{Path: record, Data: data, Acl: d.acl})
	}
	for range 3 {
		res, err := call(ctx, s, "force release", func() ([]zk.MultiResponse, error) {
			return s.conn.Multi(ops...)
		})
		// Deletes are the even ops, records the odd ones.
		holderGone, dirGone := false, false
		for i, r := range res {
			if errors.Is(r.Error, zk.ErrNoNode) {
				holderGone = holderGone || i%2 == 0
				dirGone = dirGone || i%2 == 1
			}
		}
		switch {
		case holderGone:
			return zk.ErrNoNode
		case !dirGone:
			if err == nil {
				d.pruneForced(ctx, s, now)
			}
			return err
		}
		// The records' container is missing (the first record, or
		// removed as empty a moment ago): make it and try again.
		err = do(ctx, s, "create "+d.forcedDir(), func() error {
			_, err := s.conn.CreateContainer(d.forcedDir(), nil, zk.FlagContainer, d.acl)
			return err
		})
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	return driverkit.Unavailable("zookeeper force release", fmt.Errorf("%s keeps vanishing", d.forcedDir()))
}

// pruneForced deletes the records older than ForcedRetention (by the time
// in their names), best effort: one that stays is only read again.
func (d *driver) pruneForced(ctx context.Context, s *session, now time.Time) {
	kids, err := call(ctx, s, "list forced releases", func() ([]string, error) {
		kids, _, err := s.conn.Children(d.forcedDir())
		return kids, err
	})
	if err != nil {
		return
	}
	for _, kid := range kids {
		ms, _, _ := strings.Cut(kid, "-")
		if t, err := strconv.ParseInt(ms, 10, 64); err == nil && now.Sub(time.UnixMilli(t)) > backends.ForcedRetention {
			_ = do(ctx, s, "prune forced release", func() error { return s.conn.Delete(d.forcedDir()+"/"+kid, -1) })
		}
	}
}

// ForcedReleases reads every record and keeps those under prefix (a hashed
// segment does not tell its name); At is when the server created it.
func (d *driver) ForcedReleases(ctx context.Context, prefix string) ([]backends.ForcedRelease, error) {
	s, err := d.anySession(ctx)
	if err != nil {
		return nil, err
	}
	kids, err := call(ctx, s, "list forced releases", func() ([]string, error) {
		if _, err := s.conn.Sync(d.root); err != nil { // read what the leader has
			return nil, err
		}
		kids, _, err := s.conn.Children(d.forcedDir())
		return kids, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []backends.ForcedRelease
	for _, kid := range kids {
		type read struct {
			data []byte
			stat *zk.Stat
		}
		r, err := call(ctx, s, "read forced release", func() (read, error) {
			data, stat, err := s.conn.Get(d.forcedDir() + "/" + kid)
			return read{data, stat}, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue // pruned meanwhile
		}
		if err != nil {
			return nil, err
		}
		var f backends.ForcedRelease
		if json.Unmarshal(r.data, &f) == nil && strings.HasPrefix(f.Name, prefix) {
			f.At = time.UnixMilli(r.stat.Ctime)
			out = append(out, f)
		}
	}
	slices.SortStableFunc(out, func(a, b backends.ForcedRelease) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return a.At.Compare(b.At)
	})
	return out, nil
}
