package driverkit

import (
	"fmt"
	"strings"
)

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
