package redis

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// holdID returns a new hold id that carries the holder's identity, for
// Holders: "<identity JSON>|<random>", then the kind tag of a reader or a
// permit (see shared.go), and ".<lease ms>" after that in fair mode
// (release.lua grants the head its own lease).
func holdID(req backends.Request, fair bool) string {
	ident := driverkit.MarshalIdentity(driverkit.IdentityOf(req))
	id := string(ident) + "|" + driverkit.NewID() + tag(req)
	if fair {
		id += fmt.Sprintf(".%d", req.TTL.Milliseconds())
	}
	return id
}

// Holders scans every lock key and every set of readers and permits under
// prefix (on every master of a cluster) and reads each name's holds,
// leases, tokens and queue at once: one entry per hold.
func (d *driver) Holders(ctx context.Context, prefix string) ([]backends.Holder, error) {
	return holdersOn(ctx, d.c, d.prefix, prefix, d.fair)
}

// holdersOn lists the holders under prefix on one client (a single
// instance, or a cluster: every master).
func holdersOn(ctx context.Context, c goredis.UniversalClient, keyPrefix, prefix string, fair bool) ([]backends.Holder, error) {
	var names []string
	for _, kind := range []string{"lock", "holds"} {
		ns, err := scanNames(ctx, c, keyPrefix, prefix, kind)
		if err != nil {
			return nil, err
		}
		names = append(names, ns...)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	var out []backends.Holder
	for _, name := range names {
		hs, err := inspectOn(ctx, c, keyPrefix, name, fair)
		if err != nil {
			return nil, err
		}
		out = append(out, hs...)
	}
	sortHolders(out)
	return out, nil
}

// sortHolders sorts by name, then token.
func sortHolders(hs []backends.Holder) {
	slices.SortFunc(hs, func(a, b backends.Holder) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return cmp.Compare(a.Token, b.Token)
	})
}

// scanNames returns the names under prefix that have a key of the given
// kind ("lock", "forced") on c (on every master of a cluster), sorted.
func scanNames(ctx context.Context, c goredis.UniversalClient, keyPrefix, prefix, kind string) ([]string, error) {
	// Names are escaped character by character, so the escaped prefix
	// matches exactly the escaped names it begins; glob characters in it
	// are escaped for MATCH.
	match := globEscape(keyPrefix) + ":{" + globEscape(driverkit.EscapeName(prefix, "{}")) + "*}:" + kind
	var (
		mu   sync.Mutex
		keys []string
	)
	scan := func(ctx context.Context, c goredis.Cmdable) error {
		iter := c.Scan(ctx, 0, match, 1000).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			keys = append(keys, iter.Val())
			mu.Unlock()
		}
		return iter.Err()
	}
	var err error
	if cc, ok := c.(*goredis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, c)
	}
	if err != nil {
		return nil, requestError(ctx, "redis scan", err)
	}
	var names []string
	for _, key := range keys {
		escaped := strings.TrimSuffix(strings.TrimPrefix(key, keyPrefix+":{"), "}:"+kind)
		name, err := url.PathUnescape(escaped)
		if err == nil && strings.HasPrefix(name, prefix) {
			names = append(names, name)
		}
	}
	// SCAN may return a key more than once.
	slices.Sort(names)
	return slices.Compact(names), nil
}

// inspect reads name's holds, sorted by token: none when nobody holds it.
func (d *driver) inspect(ctx context.Context, name string) ([]backends.Holder, error) {
	return inspectOn(ctx, d.c, d.prefix, name, d.fair)
}

func inspectOn(ctx context.Context, c goredis.Scripter, keyPrefix, name string, fair bool) ([]backends.Holder, error) {
	k := keysFor(keyPrefix, name)
	now := time.Now() // what is left is counted from here: Expires is never late
	res, err := inspectScript.Run(ctx, c, k.inspect()).Slice()
	if err != nil {
		return nil, requestError(ctx, "redis inspect", err)
	}
	pttl, _ := res[1].(int64)
	token, _ := res[2].(int64)
	waiters, _ := res[3].(int64)
	if !fair {
		waiters = -1 // not counted: non-fair waiters are in another set, by arrival
	}
	holder := func(id string, token, ms int64, inHolds bool) backends.Holder {
		h := backends.Holder{Name: name, Token: uint64(token), ID: id, Waiters: int(waiters)}
		h.Mode, h.Limit = kindOfID(id, inHolds)
		if i := strings.LastIndexByte(id, '|'); i > 0 {
			var ident backends.Identity
			if json.Unmarshal([]byte(id[:i]), &ident) == nil {
				h.Host, h.PID, h.Owner = ident.Host, ident.PID, ident.Owner
				if ident.At > 0 {
					h.Since = time.UnixMilli(ident.At)
				}
			}
		}
		if ms > 0 {
			h.Expires = now.Add(time.Duration(ms) * time.Millisecond)
		}
		return h
	}
	var out []backends.Holder
	if id, _ := res[0].(string); id != "" {
		h := holder(id, token, pttl, false)
		if len(res) > 5 {
			h.Value, h.Elect = res[5].(string)
		}
		out = append(out, h)
	}
	holds, _ := res[4].([]any)
	for i := 0; i+2 < len(holds); i += 3 {
		id, _ := holds[i].(string)
		ms, _ := holds[i+1].(int64)
		tok, _ := holds[i+2].(int64)
		out = append(out, holder(id, tok, ms, true))
	}
	sortHolders(out)
	return out, nil
}

// ForceRelease releases every hold of name on behalf of its holders (the
// writer, or every reader or permit): the release script, with each
// holder's own id, so the id guards it (a hold that ended meanwhile is
// left alone) and fair mode hands the name on; the script records each
// forced release too. Each holder's next renewal finds its hold gone and
// fails. It returns the oldest hold it released.
//
// As on the other backends, a hold that ended meanwhile is not a failure
// (ErrNotHeld only when every one had); a hold whose release failed is:
// it tries every hold all the same, and then returns an error that says
// how many of them it released and names each one it failed on (by token
// and id), wrapping each failure (so its class, ErrUnavailable say,
// shows). A script that failed part-way may have removed its hold all the
// same: Redis does not roll a script back.
func (d *driver) ForceRelease(ctx context.Context, name string) (backends.Holder, error) {
	hs, err := d.inspect(ctx, name)
	if err != nil {
		return backends.Holder{}, err
	}
	if len(hs) == 0 {
		return backends.Holder{}, fmt.Errorf("%w: nobody holds %q", backends.ErrNotHeld, name)
	}
	k := keysFor(d.prefix, name)
	var (
		released []backends.Holder
		failed   []forceFailure
	)
	for _, h := range hs {
		script, keys, args := forcedReleaseCall(k, h)
		n, err := runOnce(ctx, d.c, script, keys, args...).Int() // a retry of a release that ran answers 0 (once.go)
		switch {
		case err != nil:
			failed = append(failed, forceFailure{h, requestError(ctx, "redis force release", err)})
		case n == 1:
			released = append(released, h)
		}
	}
	if len(failed) > 0 {
		return backends.Holder{}, partialForce("redis", name, len(released), len(hs), failed)
	}
	if len(released) == 0 {
		return backends.Holder{}, fmt.Errorf("%w: %q changed hands meanwhile (token %d released)", backends.ErrNotHeld, name, hs[0].Token)
	}
	return released[0], nil
}

// globEscape escapes the characters SCAN's MATCH treats specially.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Holders on RedLock: a name's holder is the hold id a quorum of masters
// agree on; its token is the highest of theirs, and its lease the shortest
// left among them. Waiters are unknown (RedLock keeps no line).
func (r *redlock) Holders(ctx context.Context, prefix string) ([]backends.Holder, error) {
	per := make([][]backends.Holder, len(r.masters))
	errs := make([]error, len(r.masters))
	var wg sync.WaitGroup
	for i, m := range r.masters {
		wg.Go(func() { per[i], errs[i] = holdersOn(ctx, m, r.prefix, prefix, false) })
	}
	wg.Wait()
	answered := 0
	type vote struct {
		h backends.Holder
		n int
	}
	votes := map[[2]string]*vote{}
	for i, hs := range per {
		if errs[i] != nil {
			continue
		}
		answered++
		for _, h := range hs {
			k := [2]string{h.Name, h.ID}
			v := votes[k]
			if v == nil {
				votes[k] = &vote{h: h, n: 1}
				continue
			}
			v.n++
			v.h.Token = max(v.h.Token, h.Token)
			if h.Expires.Before(v.h.Expires) {
				v.h.Expires = h.Expires
			}
		}
	}
	if answered < r.quorum {
		return nil, driverkit.Unavailable("redlock holders", fmt.Errorf("%d of %d masters answered, a quorum is %d: %w",
			answered, len(r.masters), r.quorum, errors.Join(errs...)))
	}
	var out []backends.Holder
	for _, v := range votes {
		if v.n >= r.quorumFor(v.h.Mode, v.h.Limit) {
			out = append(out, v.h)
		}
	}
	sortHolders(out)
	return out, nil
}

// ForceRelease releases every hold of name on every master on behalf of
// the holders a quorum agrees on, recording each on every master it
// releases it on; their next renewals find no quorum and fail. It runs
// the release on every master it can reach, and counts a hold released
// only once too few masters are left that may still have it for the hold
// to stand: it must be gone (released now, or no longer there) from more
// than N − q of the N masters, q being the masters the hold needs
// (quorumFor: a majority for a writer or a reader, more for a permit).
// Released on fewer (the others did not answer, or failed), the holder
// still holds: that hold is a failure, and ForceRelease returns
// ErrUnavailable saying on how many masters it was released and naming
// every hold that still stands. As on the other backends a hold that
// ended meanwhile is no failure (ErrNotHeld only when every one had). It
// returns the oldest it released.
func (r *redlock) ForceRelease(ctx context.Context, name string) (backends.Holder, error) {
	all, err := r.Holders(ctx, name)
	if err != nil {
		return backends.Holder{}, err
	}
	hs := slices.DeleteFunc(all, func(h backends.Holder) bool { return h.Name != name })
	if len(hs) == 0 {
		return backends.Holder{}, fmt.Errorf("%w: no quorum of masters names a holder of %q", backends.ErrNotHeld, name)
	}
	k := keysFor(r.prefix, name)
	n := len(r.masters)
	var (
		released []backends.Holder
		failed   []forceFailure
	)
	for _, h := range hs {
		script, keys, args := forcedReleaseCall(k, h)
		rs := r.each(ctx, driverkit.DefaultRequestTimeout, func(ctx context.Context, m *goredis.Client) (int64, error) {
			return script.Run(ctx, m, keys, args...).Int64()
		})
		freed, gone, q := count(rs, 1), count(rs, 1)+count(rs, 0), r.quorumFor(h.Mode, h.Limit)
		switch {
		case n-gone < q && freed > 0:
			released = append(released, h)
		case n-gone < q:
			// It ended meanwhile (its holder let go, or its lease ran
			// out) on enough masters.
		default:
			cause := errorsOf(rs)
			if cause == nil {
				cause = errors.New("unexpected replies")
			}
			failed = append(failed, forceFailure{h, driverkit.Unavailable("redlock force release", fmt.Errorf(
				"released on %d of %d masters (gone from %d): it may still be on the other %d, and on %d it stands, so its holder still holds it, and renews it: %w",
				freed, n, gone, n-gone, q, cause))})
		}
	}
	if len(failed) > 0 {
		return backends.Holder{}, partialForce("redlock", name, len(released), len(hs), failed)
	}
	if len(released) == 0 {
		return backends.Holder{}, fmt.Errorf("%w: %q changed hands meanwhile (token %d released)", backends.ErrNotHeld, name, hs[0].Token)
	}
	return released[0], nil
}
