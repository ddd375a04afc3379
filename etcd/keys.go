package etcd

import (
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/padlock-go/padlock/backends"
)

// queuePrefix is the range holding the queue of one name, ending in '/'.
func (d *driver) queuePrefix(name string) string {
	// Escaping '/' keeps "a" from being a prefix of "a/b".
	return d.prefix + "/" + backends.EscapeName(name, "/") + "/"
}

// newKey returns a key unique to one acquisition: the session lease makes it
// unique across clients, the sequence number across acquisitions of one
// client. (etcd's concurrency.Mutex uses one key per session, which makes two
// goroutines of one session share a hold by accident.)
func (d *driver) newKey(pfx string, lease clientv3.LeaseID) string {
	return fmt.Sprintf("%s%016x-%d", pfx, int64(lease), d.seq.Add(1))
}
