package backends

import (
	"crypto/rand"
	"encoding/hex"
)

// NewID returns a random 128-bit id in hex (32 characters), for one
// acquisition: unique per acquisition, never per client, so that a stale
// release or renewal can never match a newer hold, and a driver can find
// its own state again after a lost answer.
func NewID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}
