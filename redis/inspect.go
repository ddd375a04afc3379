package redis

import (
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
// Holders: "<identity JSON>|<random>", and ".<lease ms>" after that in
// fair mode (release.lua grants the head its own lease).
func holdID(req backends.Request, fair bool) string {
	ident, _ := json.Marshal(driverkit.IdentityOf(req))
	id := string(ident) + "|" + driverkit.NewID()
	if fair {
		id += fmt.Sprintf(".%d", req.TTL.Milliseconds())
	}
	return id
}

// Holders scans every lock key under prefix (on every master of a
// cluster) and reads each one's holder, lease, token and queue at once.
func (d *driver) Holders(ctx context.Context, prefix string) ([]backends.Holder, error) {
	return holdersOn(ctx, d.c, d.prefix, prefix, d.fair)
}

// holdersOn lists the holders under prefix on one client (a single
// instance, or a cluster: every master).
func holdersOn(ctx context.Context, c goredis.UniversalClient, keyPrefix, prefix string, fair bool) ([]backends.Holder, error) {
	names, err := scanNames(ctx, c, keyPrefix, prefix, "lock")
	if err != nil {
		return nil, err
	}
	out := make([]backends.Holder, 0, len(names))
	for _, name := range names {
		h, ok, err := inspectOn(ctx, c, keyPrefix, name, fair)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, h)
		}
	}
	slices.SortFunc(out, func(a, b backends.Holder) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
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

// inspect reads name's holder; ok is false when nobody holds it.
func (d *driver) inspect(ctx context.Context, name string) (h backends.Holder, ok bool, err error) {
	return inspectOn(ctx, d.c, d.prefix, name, d.fair)
}

func inspectOn(ctx context.Context, c goredis.Scripter, keyPrefix, name string, fair bool) (h backends.Holder, ok bool, err error) {
	k := keysFor(keyPrefix, name)
	res, err := inspectScript.Run(ctx, c, []string{k.lock, k.fence, k.queue}).Slice()
	if err != nil {
		return h, false, requestError(ctx, "redis inspect", err)
	}
	value, _ := res[0].(string)
	if value == "" {
		return h, false, nil
	}
	pttl, _ := res[1].(int64)
	token, _ := res[2].(int64)
	waiters, _ := res[3].(int64)
	h = backends.Holder{Name: name, Token: uint64(token), ID: value, Waiters: int(waiters)}
	if !fair {
		h.Waiters = -1 // non-fair waiters leave no trace on the server
	}
	if i := strings.LastIndexByte(value, '|'); i > 0 {
		var id backends.Identity
		if json.Unmarshal([]byte(value[:i]), &id) == nil {
			h.Host, h.PID, h.Owner = id.Host, id.PID, id.Owner
			if id.At > 0 {
				h.Since = time.UnixMilli(id.At)
			}
		}
	}
	if pttl > 0 {
		h.Expires = time.Now().Add(time.Duration(pttl) * time.Millisecond)
	}
	return h, true, nil
}

// ForceRelease releases name on behalf of its holder: the release script,
// with the holder's own id, so the value guards it (a lock that changed
// hands meanwhile is left alone) and fair mode hands it to the next in
// line; the script records the forced release too. The holder's next
// renewal finds another value and fails.
func (d *driver) ForceRelease(ctx context.Context, name string) (backends.Holder, error) {
	h, ok, err := d.inspect(ctx, name)
	if err != nil {
		return h, err
	}
	if !ok {
		return h, fmt.Errorf("%w: nobody holds %q", backends.ErrNotHeld, name)
	}
	k := keysFor(d.prefix, name)
	n, err := releaseScript.Run(ctx, d.c, []string{k.lock, k.queue, k.deadlines, k.fence, k.forced}, append([]any{h.ID, k.channel}, forcedArgs(h)...)...).Int()
	if err != nil {
		return backends.Holder{}, requestError(ctx, "redis force release", err)
	}
	if n == 0 {
		return backends.Holder{}, fmt.Errorf("%w: %q changed hands meanwhile (token %d released)", backends.ErrNotHeld, name, h.Token)
	}
	return h, nil
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
		if v.n >= r.quorum {
			out = append(out, v.h)
		}
	}
	slices.SortFunc(out, func(a, b backends.Holder) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// ForceRelease releases name on every master on behalf of the holder a
// quorum agrees on, recording it on each; its next renewal finds no
// quorum and fails.
func (r *redlock) ForceRelease(ctx context.Context, name string) (backends.Holder, error) {
	hs, err := r.Holders(ctx, name)
	if err != nil {
		return backends.Holder{}, err
	}
	i := slices.IndexFunc(hs, func(h backends.Holder) bool { return h.Name == name })
	if i < 0 {
		return backends.Holder{}, fmt.Errorf("%w: no quorum of masters names a holder of %q", backends.ErrNotHeld, name)
	}
	h := hs[i]
	k := keysFor(r.prefix, name)
	rs := r.each(ctx, driverkit.DefaultRequestTimeout, func(ctx context.Context, m *goredis.Client) (int64, error) {
		return releaseScript.Run(ctx, m, []string{k.lock, k.queue, k.deadlines, k.fence, k.forced}, append([]any{h.ID, k.channel}, forcedArgs(h)...)...).Int64()
	})
	if count(rs, 1) == 0 {
		if err := errorsOf(rs); err != nil {
			return backends.Holder{}, driverkit.Unavailable("redlock force release", err)
		}
		return backends.Holder{}, fmt.Errorf("%w: %q changed hands meanwhile (token %d released)", backends.ErrNotHeld, name, h.Token)
	}
	return h, nil
}
