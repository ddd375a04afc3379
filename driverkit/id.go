package driverkit

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"strconv"
	"time"

	"github.com/padlock-go/padlock/backends"
)

// NewID returns a random 128-bit id in hex (32 characters), for one
// acquisition: unique per acquisition, never per client, so that a stale
// release or renewal can never match a newer hold, and a driver can find
// its own state again after a lost answer.
func NewID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

var hostname = func() string {
	h, _ := os.Hostname()
	return h
}()

// pid is this process's id, read once: os.Getpid is a system call, and
// every acquisition records it.
var pid = os.Getpid()

// hostJSON is hostname as JSON encodes it, made once.
var hostJSON, _ = json.Marshal(hostname)

// IdentityOf returns the identity of an acquisition made now by this
// process for req.
func IdentityOf(req backends.Request) backends.Identity {
	return backends.Identity{Host: hostname, PID: pid, Owner: req.Owner, At: time.Now().UnixMilli()}
}

// MarshalIdentity returns id as json.Marshal encodes it, byte for byte,
// without its reflection: every acquisition on Redis and etcd records
// its identity this way.
func MarshalIdentity(id backends.Identity) []byte {
	b := make([]byte, 0, 32+len(hostJSON)+len(id.Owner))
	b = append(b, '{')
	field := func(name string) {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, '"', ':')
	}
	if id.Host != "" {
		field("host")
		if id.Host == hostname {
			b = append(b, hostJSON...)
		} else {
			s, _ := json.Marshal(id.Host)
			b = append(b, s...)
		}
	}
	if id.PID != 0 {
		field("pid")
		b = strconv.AppendInt(b, int64(id.PID), 10)
	}
	if id.Owner != "" {
		field("owner")
		s, _ := json.Marshal(id.Owner)
		b = append(b, s...)
	}
	if id.At != 0 {
		field("at")
		b = strconv.AppendInt(b, id.At, 10)
	}
	return append(b, '}')
}
