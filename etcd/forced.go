package etcd

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

var _ backends.ForcedLister = (*driver)(nil)

// forcedDir is where the records of forced releases live, under the
// prefix: prefix/%forced/<escaped name>/<token>, each bound to a lease of
// ForcedRetention. No escaped name begins with "%f" (EscapeName writes '%'
// only before two hex digits), so the records never mix with a name's
// queue, and Holders skips them.
const forcedDir = "%forced/"

func (d *driver) forcedPrefix(name string) string {
	return d.prefix + "/" + forcedDir + driverkit.EscapeName(name, "/")
}

// forcedOps returns the puts that record the forced releases of hs, one
// each, bound to a new lease of ForcedRetention that the caller revokes if
// none of the releases happens.
func (d *driver) forcedOps(ctx context.Context, hs []backends.Holder) ([]clientv3.Op, clientv3.LeaseID, error) {
	var lease *clientv3.LeaseGrantResponse
	err := d.call(ctx, "grant record lease", func(ctx context.Context) (err error) {
		lease, err = d.cli.Grant(ctx, int64(backends.ForcedRetention/time.Second))
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	now := time.Now()
	ops := make([]clientv3.Op, len(hs))
	for i, h := range hs {
		b, _ := json.Marshal(backends.ForcedRelease{Name: h.Name, Token: h.Token, ID: h.ID, At: now})
		key := d.forcedPrefix(h.Name) + "/" + strconv.FormatUint(h.Token, 10)
		ops[i] = clientv3.OpPut(key, string(b), clientv3.WithLease(lease.ID))
	}
	return ops, lease.ID, nil
}

// ForcedReleases reads the records under prefix.
func (d *driver) ForcedReleases(ctx context.Context, prefix string) ([]backends.ForcedRelease, error) {
	var resp *clientv3.GetResponse
	err := d.call(ctx, "list forced releases", func(ctx context.Context) (err error) {
		resp, err = d.cli.Get(ctx, d.forcedPrefix(prefix), clientv3.WithPrefix())
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]backends.ForcedRelease, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var f backends.ForcedRelease
		if json.Unmarshal(kv.Value, &f) == nil && strings.HasPrefix(f.Name, prefix) {
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
