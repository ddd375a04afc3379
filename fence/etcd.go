package fence

import (
	"bytes"
	"context"
	"fmt"
	"strconv"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// EtcdKeyPrefix starts the key of a resource's token on etcd: the key
// EtcdKeyPrefix+resource holds the highest token seen for the resource as
// 20 decimal digits, zero-padded (etcd compares values as bytes, and
// padded decimals sort as their numbers do). It is the only key Etcd adds;
// put it elsewhere with a namespaced KV (go.etcd.io/etcd/client/v3/namespace).
const EtcdKeyPrefix = "padlock-fence/"

// Etcd checks token against the highest recorded for resource (in the key
// EtcdKeyPrefix+resource), and in the same transaction records it and runs
// ops: one Txn, so that nothing runs between the check and the ops. A token
// below the highest returns a *StaleError (errors.Is ErrStale) and runs
// none of ops; otherwise Etcd returns ops' responses, in order. With no ops,
// Etcd only checks and records. ops must not touch the token key.
//
// The transaction nests one in its else-branch (etcd 3.3 and later): if the
// token key does not exist, create it and run ops; else if its value is
// above the token, read it (stale); else record the token and run ops.
func Etcd(ctx context.Context, kv clientv3.KV, resource string, token uint64, ops ...clientv3.Op) ([]*pb.ResponseOp, error) {
	if err := check(resource, token); err != nil {
		return nil, err
	}
	if kv == nil {
		return nil, invalid("Etcd needs a KV (a *clientv3.Client)")
	}
	key := EtcdKeyPrefix + resource
	for i, op := range ops {
		if bytes.Equal(op.KeyBytes(), []byte(key)) {
			return nil, invalid("op %d is on the token key %q itself", i, key)
		}
	}
	tok := etcdToken(token)
	write := append([]clientv3.Op{clientv3.OpPut(key, tok)}, ops...)
	resp, err := kv.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(write...).
		Else(clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.Value(key), ">", tok)},
			[]clientv3.Op{clientv3.OpGet(key)},
			write)).
		Commit()
	if err != nil {
		return nil, fmt.Errorf("fence: etcd: %w", err)
	}
	if resp.Succeeded {
		return resp.Responses[1:], nil
	}
	inner := resp.Responses[0].GetResponseTxn()
	if inner == nil {
		return nil, fmt.Errorf("fence: etcd: unexpected answer %v", resp.Responses)
	}
	if !inner.Succeeded {
		return inner.Responses[1:], nil
	}
	kvs := inner.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) != 1 {
		return nil, fmt.Errorf("fence: etcd: token key %q vanished", key)
	}
	highest, err := strconv.ParseUint(string(kvs[0].Value), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("fence: etcd: %s holds %q, not a token", key, kvs[0].Value)
	}
	return nil, stale(resource, token, highest)
}

// etcdToken is token as 20 zero-padded decimal digits: byte order is
// numeric order.
func etcdToken(token uint64) string { return fmt.Sprintf("%020d", token) }
