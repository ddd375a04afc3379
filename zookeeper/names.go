package zookeeper

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode/utf8"

	"github.com/padlock-go/padlock/driverkit"
)

// maxPlainName is the longest name kept readable in its path segment;
// longer names are hashed (a 512-byte name escaped could approach 1.5 KB,
// and every child path repeats it).
const maxPlainName = 200

// segment maps a lock name onto one ZooKeeper path segment, one-to-one:
//
//	"k-" + the name with '/', '%' and control bytes escaped as %XX
//	"h-" + hex SHA-256 of the name, for long names and names with runes
//	       ZooKeeper refuses in paths (U+007F–U+009F, U+E000–U+F8FF,
//	       U+FFF0 and above, which UTF-16 makes surrogate pairs)
//
// The prefixes keep the two forms apart, and make "." and ".." ordinary
// segments. The real name is kept in each queue node's data (nodeData).
func segment(name string) string {
	if len(name) <= maxPlainName && plain(name) {
		return "k-" + driverkit.EscapeName(name, "/"+controls)
	}
	sum := sha256.Sum256([]byte(name))
	return "h-" + hex.EncodeToString(sum[:])
}

// controls are the ASCII control bytes, escaped rather than refused.
var controls = func() string {
	var b strings.Builder
	for c := byte(1); c < 0x20; c++ {
		b.WriteByte(c)
	}
	return b.String()
}()

// plain reports whether name has no rune that ZooKeeper refuses in a path
// other than the ASCII ones segment escapes.
func plain(name string) bool {
	for _, r := range name {
		switch {
		case r == utf8.RuneError,
			r >= 0x7f && r <= 0x9f,
			r >= 0xd800 && r <= 0xf8ff,
			r >= 0xfff0:
			// Above U+FFFF too: the server checks paths in UTF-16, where
			// such a rune is a surrogate pair, which it refuses.
			return false
		}
	}
	return true
}
