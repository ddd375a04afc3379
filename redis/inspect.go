package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock/backends"
)

// holdID returns a new hold id that carries the holder's identity, for
// Holders: "<identity JSON>|<random>", and ".<lease ms>" after that in
// fair mode (release.lua grants the head its own lease).
func holdID(req backends.Request, fair bool) string {
	ident, _ := json.Marshal(backends.IdentityOf(req))
	id := string(ident) + "|" + backends.NewID()
	if fair {
		id += fmt.Sprintf(".%d", req.TTL.Milliseconds())
	}
	return id
}

// Holders scans every lock key under prefix (on every master of a
// cluster) and reads each one's holder, lease, token and queue at once.
func (d *driver) Holders(ctx context.Context, prefix string) ([]backends.Holder, error) {
	// Names are escaped character by character, so the escaped prefix
	// matches exactly the escaped names it begins; glob characters in it
	// are escaped for MATCH.
	match := globEscape(d.prefix) + ":{" + globEscape(backends.EscapeName(prefix, "{}")) + "*}:lock"
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
	if cc, ok := d.c.(*goredis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, d.c)
	}
	if err != nil {
		return nil, backends.RequestError(ctx, "redis scan", err)
	}
	// SCAN may return a key more than once.
	slices.Sort(keys)
	keys = slices.Compact(keys)
	out := make([]backends.Holder, 0, len(keys))
	for _, key := range keys {
		escaped := strings.TrimSuffix(strings.TrimPrefix(key, d.prefix+":{"), "}:lock")
		name, err := url.PathUnescape(escaped)
		if err != nil || !strings.HasPrefix(name, prefix) {
			continue
		}
		h, ok, err := d.inspect(ctx, name)
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

// inspect reads name's holder; ok is false when nobody holds it.
func (d *driver) inspect(ctx context.Context, name string) (h backends.Holder, ok bool, err error) {
	k := keysFor(d.prefix, name)
	res, err := inspectScript.Run(ctx, d.c, []string{k.lock, k.fence, k.queue}).Slice()
	if err != nil {
		return h, false, backends.RequestError(ctx, "redis inspect", err)
	}
	value, _ := res[0].(string)
	if value == "" {
		return h, false, nil
	}
	pttl, _ := res[1].(int64)
	token, _ := res[2].(int64)
	waiters, _ := res[3].(int64)
	h = backends.Holder{Name: name, Token: uint64(token), ID: value, Waiters: int(waiters)}
	if !d.fair {
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
// line. The holder's next renewal finds another value and fails.
func (d *driver) ForceRelease(ctx context.Context, name string) (backends.Holder, error) {
	h, ok, err := d.inspect(ctx, name)
	if err != nil {
		return h, err
	}
	if !ok {
		return h, fmt.Errorf("%w: nobody holds %q", backends.ErrNotHeld, name)
	}
	k := keysFor(d.prefix, name)
	n, err := releaseScript.Run(ctx, d.c, []string{k.lock, k.queue, k.deadlines, k.fence}, h.ID, k.channel).Int()
	if err != nil {
		return backends.Holder{}, backends.RequestError(ctx, "redis force release", err)
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
