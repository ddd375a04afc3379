package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

var (
	_ backends.ForcedLister = (*driver)(nil)
	_ backends.ForcedLister = (*redlock)(nil)
)

// forcedArgs are release.lua's arguments that make it record h's forced
// release: the record, and how long records are kept. The record lives in
// the name's "forced" key, a sorted set by the server's time, which the
// script trims to ForcedRetention and expires after it.
func forcedArgs(h backends.Holder) []any {
	b, _ := json.Marshal(backends.ForcedRelease{Name: h.Name, Token: h.Token, ID: h.ID})
	return []any{string(b), backends.ForcedRetention.Milliseconds()}
}

// forcedReleaseCall is the script that releases h on its holder's behalf,
// recording it, with its keys and arguments: a candidacy's removes its
// value too.
func forcedReleaseCall(k keys, h backends.Holder) (*goredis.Script, []string, []any) {
	args := append([]any{h.ID, k.channel}, forcedArgs(h)...)
	if h.Elect {
		return electReleaseScript, k.electing(k.forcedRelease()), electArgs(k, "release", "", args...)
	}
	return releaseScript, k.forcedRelease(), args
}

// forceFailure is a hold a forced release could not take away, and why.
type forceFailure struct {
	h   backends.Holder
	err error
}

// partialForce is the error of a forced release of name that failed on
// some of its n holds, having released done of them: it names each hold
// it failed on, by token and id, with its cause, and wraps every cause
// (so their class, ErrUnavailable say, shows).
func partialForce(backend, name string, done, n int, failed []forceFailure) error {
	format := "%s: force-released %d of the %d holds of %q; failed on "
	args := []any{backend, done, n, name}
	for i, f := range failed {
		if i > 0 {
			format += "; "
		}
		format += "token %d (id %s): %w"
		args = append(args, f.h.Token, f.h.ID, f.err)
	}
	return fmt.Errorf(format, args...)
}

// ForcedReleases reads the records under prefix (on every master of a
// cluster).
func (d *driver) ForcedReleases(ctx context.Context, prefix string) ([]backends.ForcedRelease, error) {
	out, err := forcedOn(ctx, d.c, d.prefix, prefix)
	if err != nil {
		return nil, err
	}
	sortForced(out)
	return out, nil
}

// ForcedReleases on RedLock: the records of every master that answers,
// each once (ForceRelease writes one on every master it reaches).
func (r *redlock) ForcedReleases(ctx context.Context, prefix string) ([]backends.ForcedRelease, error) {
	per := make([][]backends.ForcedRelease, len(r.masters))
	errs := make([]error, len(r.masters))
	var wg sync.WaitGroup
	for i, m := range r.masters {
		wg.Go(func() { per[i], errs[i] = forcedOn(ctx, m, r.prefix, prefix) })
	}
	wg.Wait()
	seen := map[[2]string]bool{}
	var out []backends.ForcedRelease
	answered := 0
	for i, fs := range per {
		if errs[i] != nil {
			continue
		}
		answered++
		for _, f := range fs {
			if k := [2]string{f.Name, f.ID}; !seen[k] {
				seen[k] = true
				out = append(out, f)
			}
		}
	}
	if answered < r.quorum {
		return nil, driverkit.Unavailable("redlock forced releases", errors.Join(errs...))
	}
	sortForced(out)
	return out, nil
}

// forcedOn reads the records of the names under prefix on one client.
func forcedOn(ctx context.Context, c goredis.UniversalClient, keyPrefix, prefix string) ([]backends.ForcedRelease, error) {
	names, err := scanNames(ctx, c, keyPrefix, prefix, "forced")
	if err != nil {
		return nil, err
	}
	var out []backends.ForcedRelease
	for _, name := range names {
		zs, err := c.ZRangeWithScores(ctx, keysFor(keyPrefix, name).forced, 0, -1).Result()
		if err != nil {
			return nil, requestError(ctx, "redis forced releases", err)
		}
		for _, z := range zs {
			var f backends.ForcedRelease
			if s, ok := z.Member.(string); ok && json.Unmarshal([]byte(s), &f) == nil && f.Name == name {
				f.At = time.UnixMilli(int64(z.Score))
				out = append(out, f)
			}
		}
	}
	return out, nil
}

func sortForced(fs []backends.ForcedRelease) {
	slices.SortStableFunc(fs, func(a, b backends.ForcedRelease) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return a.At.Compare(b.At)
	})
}
