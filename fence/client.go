package fence

import (
	"net/http"
	"strconv"

	"github.com/padlock-go/padlock"
)

// SetHeader sets req's TokenHeader to lk's token and, unless req names a
// resource already, its ResourceHeader to lk's name: what Middleware reads.
func SetHeader(req *http.Request, lk *padlock.Lock) error {
	if req == nil || lk == nil {
		return invalid("SetHeader needs a request and a lock, got request %v, lock %v", req != nil, lk != nil)
	}
	if req.Header == nil {
		req.Header = http.Header{}
	}
	req.Header.Set(TokenHeader, strconv.FormatUint(lk.Token(), 10))
	if req.Header.Get(ResourceHeader) == "" {
		req.Header.Set(ResourceHeader, lk.Name())
	}
	return nil
}

// Transport returns a RoundTripper that sends every request through base
// (nil: http.DefaultTransport) with the headers SetHeader sets from lk,
// on a copy of the request (a RoundTripper must not change its argument).
// It does not look at lk.Done: the service refuses a stale token, and the
// caller decides what a lost lock stops.
func Transport(base http.RoundTripper, lk *padlock.Lock) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return roundTripper{base, lk}
}

type roundTripper struct {
	base http.RoundTripper
	lk   *padlock.Lock
}

func (rt roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if req == nil {
		return nil, invalid("RoundTrip of a nil request")
	}
	r := req.Clone(req.Context())
	if err := SetHeader(r, rt.lk); err != nil {
		if req.Body != nil {
			req.Body.Close() // a RoundTripper closes the body, even on error
		}
		return nil, err
	}
	return rt.base.RoundTrip(r)
}
