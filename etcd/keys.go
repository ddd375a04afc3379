package etcd

import (
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// nameEscaper maps any valid lock name to one path segment: '/' would
// otherwise make "a" a prefix of "a/b", and '%' is escaped so the mapping
// stays one-to-one.
var nameEscaper = strings.NewReplacer("%", "%25", "/", "%2F")

// queuePrefix is the range holding the queue of one name, ending in '/'.
func (d *driver) queuePrefix(name string) string {
	return d.prefix + "/" + nameEscaper.Replace(name) + "/"
}

// newKey returns a key unique to one acquisition: the session lease makes it
// unique across clients, the sequence number across acquisitions of one
// client. (etcd's concurrency.Mutex uses one key per session, which makes two
// goroutines of one session share a hold by accident.)
func (d *driver) newKey(pfx string, lease clientv3.LeaseID) string {
	return fmt.Sprintf("%s%016x-%d", pfx, int64(lease), d.seq.Add(1))
}
