package fence

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
)

// The headers a fenced request carries.
const (
	// TokenHeader carries the fencing token, in decimal.
	TokenHeader = "Padlock-Fencing-Token"
	// ResourceHeader names the resource, when the middleware's resource
	// function is the default one.
	ResourceHeader = "Padlock-Resource"
)

// Middleware returns HTTP middleware for a service that accepts writes
// under a fencing token. For each request it reads the token from
// TokenHeader and the resource from resource(req) (nil: the
// ResourceHeader), records the token in store (nil: DefaultMemory, the
// one store of every Middleware given nil) and only then calls next. It answers, without calling next:
//
//   - 400 Bad Request when the token is missing or not a valid token, or
//     the resource is missing or invalid;
//   - 409 Conflict when the token is below the highest the store has seen
//     for the resource (the body is the *StaleError's message);
//   - 503 Service Unavailable when the store fails.
//
// Wrap every route through which a holder touches the resource, reads
// included: a newer holder's first contact is what shuts the older one out.
//
// Requests for one resource are served one at a time, each from the check
// to the end of next, so that no older holder's write that passed its check
// can land after a newer holder's check, in this process: across every
// route and every Middleware of the process, so that wrapping each route
// with a Middleware call of its own keeps the rule (a handler must not
// itself wait for a fenced request for the same resource to this process).
// A service with
// several replicas must make the write itself conditional, in the same
// transaction as the check: use Table.Do, Redis, Etcd or ZooKeeper inside
// the handler, with the token from FromContext.
func Middleware(store Store, resource func(*http.Request) (string, error)) func(http.Handler) http.Handler {
	if store == nil {
		store = DefaultMemory
	}
	if resource == nil {
		resource = headerResource
	}
	locks := &resourceLocks
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			token, err := parseToken(req.Header.Values(TokenHeader))
			var res string
			if err == nil {
				res, err = resource(req)
			}
			if err == nil {
				err = check(res, token)
			}
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			unlock := locks.lock(res)
			defer unlock()
			if err := store.Record(req.Context(), res, token); err != nil {
				code := http.StatusServiceUnavailable
				switch {
				case errors.Is(err, ErrStale):
					code = http.StatusConflict
				case errors.Is(err, ErrInvalid):
					code = http.StatusBadRequest
				}
				http.Error(w, err.Error(), code)
				return
			}
			next.ServeHTTP(w, req.WithContext(context.WithValue(req.Context(), ctxKey{}, fenced{res, token})))
		})
	}
}

// DefaultMemory is the store of every Middleware given a nil store: one
// per process, so that routes wrapped each by a Middleware of their own
// see one another's tokens (a newer holder's request on one route shuts
// an older holder out of every other).
var DefaultMemory = NewMemory()

// resourceLocks serialises the requests for each resource across every
// Middleware of the process.
var resourceLocks keyedMutex

// FromContext returns the resource and token of a request the middleware
// let through, for a handler that passes them on to its own storage.
func FromContext(ctx context.Context) (resource string, token uint64, ok bool) {
	f, ok := ctx.Value(ctxKey{}).(fenced)
	return f.resource, f.token, ok
}

type ctxKey struct{}

type fenced struct {
	resource string
	token    uint64
}

func headerResource(req *http.Request) (string, error) {
	v := req.Header.Values(ResourceHeader)
	switch len(v) {
	case 0:
		return "", invalid("missing %s header", ResourceHeader)
	case 1:
		return v[0], nil
	}
	return "", invalid("%d %s headers, want one", len(v), ResourceHeader)
}

func parseToken(v []string) (uint64, error) {
	switch len(v) {
	case 0:
		return 0, invalid("missing %s header", TokenHeader)
	case 1:
	default:
		return 0, invalid("%d %s headers, want one", len(v), TokenHeader)
	}
	t, err := strconv.ParseUint(v[0], 10, 64)
	if err != nil {
		return 0, invalid("%s %q is not a decimal token", TokenHeader, v[0])
	}
	return t, nil
}

// keyedMutex is a mutex per key, holding an entry only while a key is
// locked or awaited, so that it does not grow with the resources seen.
type keyedMutex struct {
	mu sync.Mutex
	m  map[string]*keyedEntry
}

type keyedEntry struct {
	mu   sync.Mutex
	refs int
}

func (k *keyedMutex) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyedEntry{}
	}
	e := k.m[key]
	if e == nil {
		e = &keyedEntry{}
		k.m[key] = e
	}
	e.refs++
	k.mu.Unlock()
	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		k.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}
