package padlock

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxNameLen is the longest lock name, in bytes. It keeps every backend's
// mapping of the name (escaped etcd keys, ZooKeeper paths, SQL columns) within
// that backend's limits.
const MaxNameLen = 512

// validateName reports whether name is a valid lock name. Every Locker call
// checks names here, so the rules are the same on every backend.
func validateName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: name is empty", ErrInvalidName)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: name is %d bytes, longer than %d", ErrInvalidName, len(name), MaxNameLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: name %q is not valid UTF-8", ErrInvalidName, name)
	case strings.IndexByte(name, 0) >= 0:
		return fmt.Errorf("%w: name %q contains a NUL byte", ErrInvalidName, name)
	}
	return nil
}
