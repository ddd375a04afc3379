package fence

import (
	"net/http"
	"strconv"

	"github.com/padlock-go/padlock"
)

// Holder is what carries a fencing token: a *padlock.Lock, or a
// *padlock.Leadership (a leader's term).
type Holder interface {
	Token() uint64
}

// SetHeader sets req's TokenHeader to h's token and, unless req names a
// resource already, its ResourceHeader to the lock's name (a
// *padlock.Lock's; a leader's term names none: set ResourceHeader
// first): what Middleware reads.
func SetHeader(req *http.Request, h Holder) error {
	if req == nil || isNil(h) {
		return invalid("SetHeader needs a request and a lock or leadership, got request %v, holder %v", req != nil, !isNil(h))
	}
	if req.Header == nil {
		req.Header = http.Header{}
	}
	req.Header.Set(TokenHeader, strconv.FormatUint(h.Token(), 10))
	if lk, ok := h.(*padlock.Lock); ok && req.Header.Get(ResourceHeader) == "" {
		req.Header.Set(ResourceHeader, lk.Name())
	}
	return nil
}

// isNil reports whether h is nil or a nil lock or leadership.
func isNil(h Holder) bool {
	switch v := h.(type) {
	case nil:
		return true
	case *padlock.Lock:
		return v == nil
	case *padlock.Leadership:
		return v == nil
	}
	return false
}

// Transport returns a RoundTripper that sends every request through base
// (nil: http.DefaultTransport) with the headers SetHeader sets from h,
// on a copy of the request (a RoundTripper must not change its argument).
// It does not look at Done: the service refuses a stale token, and the
// caller decides what a lost lock stops.
func Transport(base http.RoundTripper, h Holder) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return roundTripper{base, h}
}

type roundTripper struct {
	base http.RoundTripper
	h    Holder
}

func (rt roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if req == nil {
		return nil, invalid("RoundTrip of a nil request")
	}
	r := req.Clone(req.Context())
	if err := SetHeader(r, rt.h); err != nil {
		if req.Body != nil {
			req.Body.Close() // a RoundTripper closes the body, even on error
		}
		return nil, err
	}
	return rt.base.RoundTrip(r)
}
