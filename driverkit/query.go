package driverkit

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/padlock-go/padlock/backends"
)

// Query parses u's query strictly. u.Query() drops a part that does not
// parse without a word, so "mode=advisory;" or "fair=true;ttl=5s" would
// open with the defaults; Query makes any such part backends.ErrInvalidURL, naming
// the parameter and what is wrong with it (never its value, which may be a
// password).
func Query(u *url.URL) (url.Values, error) {
	q, err := url.ParseQuery(u.RawQuery)
	if err == nil {
		return q, nil
	}
	for part := range strings.SplitSeq(u.RawQuery, "&") {
		if _, perr := url.ParseQuery(part); perr != nil {
			key, _, _ := strings.Cut(part, "=")
			if strings.Contains(part, ";") {
				return nil, fmt.Errorf(`%w: url parameter %q contains ";": separate parameters with "&" (write a ";" inside a value as %%3B)`, backends.ErrInvalidURL, key)
			}
			return nil, fmt.Errorf("%w: url parameter %q: %v", backends.ErrInvalidURL, key, perr)
		}
	}
	return nil, fmt.Errorf("%w: url query: %v", backends.ErrInvalidURL, err)
}

// CheckParams returns backends.ErrInvalidOption naming the first query parameter of
// u that is not in known, and listing every parameter the scheme accepts;
// and backends.ErrInvalidURL for a query that does not parse (see Query).
// Backends call it from their Opener with their own parameters; ttl and
// wait, which the portable layer takes, are always listed.
func CheckParams(u *url.URL, known ...string) error {
	q, err := Query(u)
	if err != nil {
		return err
	}
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(known, k) {
			return fmt.Errorf("%w: unknown url parameter %q for %s:// (known: %s)",
				backends.ErrInvalidOption, k, u.Scheme, strings.Join(append([]string{"ttl", "wait"}, known...), ", "))
		}
	}
	for _, k := range keys {
		if len(q[k]) > 1 {
			return fmt.Errorf("%w: url parameter %s given %d times", backends.ErrInvalidOption, k, len(q[k]))
		}
	}
	return nil
}
