package driverkit

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"time"

	"github.com/padlock-go/padlock/backends"
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

var hostname = func() string {
	h, _ := os.Hostname()
	return h
}()

// IdentityOf returns the identity of an acquisition made now by this
// process for req.
func IdentityOf(req backends.Request) backends.Identity {
	return backends.Identity{Host: hostname, PID: os.Getpid(), Owner: req.Owner, At: time.Now().UnixMilli()}
}
