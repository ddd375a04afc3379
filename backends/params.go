package backends

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// CheckParams returns ErrInvalidOption naming the first query parameter of u
// that is not in known. Backends call it from their Opener.
func CheckParams(u *url.URL, known ...string) error {
	for k := range u.Query() {
		if !slices.Contains(known, k) {
			return fmt.Errorf("%w: unknown url parameter %q for %s:// (known: ttl, wait%s)",
				ErrInvalidOption, k, u.Scheme, prefixed(known))
		}
	}
	return nil
}

func prefixed(known []string) string {
	if len(known) == 0 {
		return ""
	}
	return ", " + strings.Join(known, ", ")
}
