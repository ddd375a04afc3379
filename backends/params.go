package backends

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Query parses u's query strictly. u.Query() drops a part that does not
// parse without a word, so "mode=advisory;" or "fair=true;ttl=5s" would
// open with the defaults; Query makes any such part ErrInvalidURL, naming
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
				return nil, fmt.Errorf(`%w: url parameter %q contains ";": separate parameters with "&" (write a ";" inside a value as %%3B)`, ErrInvalidURL, key)
			}
			return nil, fmt.Errorf("%w: url parameter %q: %v", ErrInvalidURL, key, perr)
		}
	}
	return nil, fmt.Errorf("%w: url query: %v", ErrInvalidURL, err)
}

// CheckParams returns ErrInvalidOption naming the first query parameter of
// u that is not in known, and listing every parameter the scheme accepts;
// and ErrInvalidURL for a query that does not parse (see Query).
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
				ErrInvalidOption, k, u.Scheme, strings.Join(append([]string{"ttl", "wait"}, known...), ", "))
		}
	}
	for _, k := range keys {
		if len(q[k]) > 1 {
			return fmt.Errorf("%w: url parameter %s given %d times", ErrInvalidOption, k, len(q[k]))
		}
	}
	return nil
}

// DurationParam returns the positive duration in u's query parameter key,
// or def when it is absent.
func DurationParam(u *url.URL, key string, def time.Duration) (time.Duration, error) {
	v, ok := u.Query()[key]
	if !ok {
		return def, nil
	}
	d, err := time.ParseDuration(v[0])
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%w: url parameter %s=%q is not a positive duration", ErrInvalidOption, key, v[0])
	}
	return d, nil
}

// Timeouts returns the dial_timeout and request_timeout parameters of u:
// how long Open waits for the server (dial, default def), and the bound on
// each request (default DefaultRequestTimeout).
func Timeouts(u *url.URL, def time.Duration) (dial, request time.Duration, err error) {
	if dial, err = DurationParam(u, "dial_timeout", def); err != nil {
		return 0, 0, err
	}
	if request, err = DurationParam(u, "request_timeout", DefaultRequestTimeout); err != nil {
		return 0, 0, err
	}
	return dial, request, nil
}

// BoolParam returns the boolean in u's query parameter key, or def.
func BoolParam(u *url.URL, key string, def bool) (bool, error) {
	v, ok := u.Query()[key]
	if !ok {
		return def, nil
	}
	b, err := strconv.ParseBool(v[0])
	if err != nil {
		return false, fmt.Errorf("%w: url parameter %s=%q is not a boolean", ErrInvalidOption, key, v[0])
	}
	return b, nil
}

// IntParam returns the integer in u's query parameter key, at least min,
// or def when it is absent.
func IntParam(u *url.URL, key string, min, def int) (int, error) {
	v, ok := u.Query()[key]
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(v[0])
	if err != nil || n < min {
		return 0, fmt.Errorf("%w: url parameter %s=%q is not a whole number of at least %d", ErrInvalidOption, key, v[0], min)
	}
	return n, nil
}

// Hosts splits the comma-separated host list of u into host:port
// addresses. Each must have a host and a port (defaultPort fills a missing
// port when it is not empty), and none may repeat: two entries for one
// server would count it twice towards a quorum.
func Hosts(u *url.URL, defaultPort string) ([]string, error) {
	if u.Host == "" {
		return nil, fmt.Errorf("%w: %s:// needs host:port[,host:port...]", ErrInvalidURL, u.Scheme)
	}
	var out []string
	seen := map[string]bool{}
	for _, h := range strings.Split(u.Host, ",") {
		host, port, err := net.SplitHostPort(h)
		if err != nil && defaultPort != "" && !strings.Contains(strings.TrimPrefix(h, "["), ":") {
			host, port, err = h, defaultPort, nil
		}
		if err != nil || host == "" || port == "" {
			return nil, fmt.Errorf("%w: %q in %s:// is not host:port", ErrInvalidURL, h, u.Scheme)
		}
		if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
			return nil, fmt.Errorf("%w: %q in %s:// has no valid port", ErrInvalidURL, h, u.Scheme)
		}
		addr := net.JoinHostPort(strings.ToLower(host), port)
		if seen[addr] {
			return nil, fmt.Errorf("%w: %s appears twice in %s://", ErrInvalidURL, addr, u.Scheme)
		}
		seen[addr] = true
		out = append(out, addr)
	}
	return out, nil
}

// Credentials returns the user name and password of u, if any.
func Credentials(u *url.URL) (user, password string) {
	if u.User == nil {
		return "", ""
	}
	p, _ := u.User.Password()
	return u.User.Username(), p
}

// EscapeName maps a lock name onto a single segment of a backend's
// keyspace, one-to-one: '%' and every byte in special (a path separator,
// hash-tag braces) become %XX, so no two names share a segment and no name
// reaches outside its own.
func EscapeName(name, special string) string {
	if !strings.ContainsAny(name, special) && !strings.Contains(name, "%") {
		return name
	}
	var b strings.Builder
	b.Grow(len(name) + 8)
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '%' || strings.IndexByte(special, c) >= 0 {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
