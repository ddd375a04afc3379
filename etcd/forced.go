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

// forcedOp returns the put that records h's forced release, bound to a new
// lease of ForcedRetention that the caller revokes if the release does
// not happen.
func (d *driver) forcedOp(ctx context.Context, h backends.Holder) (clientv3.Op, clientv3.LeaseID, error) {
	var lease *clientv3.LeaseGrantResponse
	err := d.call(ctx, "grant record lease", func(ctx context.Context) (err error) {
		lease, err = d.cli.Grant(ctx, int64(backends.ForcedRetention/time.Second))
		return err
	})
	if err != nil {
		return clientv3.Op{}, 0, err
	}
	b, _ := json.Marshal(backends.ForcedRelease{Name: h.Name, Token: h.Token, ID: h.ID, At: time.Now()})
	key := d.forcedPrefix(h.Name) + "/" + strconv.FormatUint(h.Token, 10)
	return clientv3.OpPut(key, string(b), clientv3.WithLease(lease.ID)), lease.ID, nil
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
