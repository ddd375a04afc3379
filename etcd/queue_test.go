package etcd

import (
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/padlock-go/padlock/backends"
)

// One watch response that spans two revisions, as a watch catching up
// sends: A, the holder, is deleted at revision 20, which admits C; C's
// whole hold ends at revision 21, which admits W. W followed C, not A:
// taking A for its predecessor would time A's hand-off and C's hold as
// one hand-off (padlock.handoff.duration).
func TestQueueFollowsAcrossRevisionsOfOneResponse(t *testing.T) {
	q := &queue{name: "n", waiters: map[*waiter]struct{}{}, closed: true}
	q.keys = map[string]claim{
		"p/a": {key: "p/a", rev: 10, mode: backends.Exclusive, limit: 1},
		"p/c": {key: "p/c", rev: 11, mode: backends.Exclusive, limit: 1},
		"p/w": {key: "p/w", rev: 12, mode: backends.Exclusive, limit: 1},
	}
	q.rev = 12
	w := &waiter{claim: q.keys["p/w"], turn: make(chan error, 1)}
	q.waiters[w] = struct{}{}
	del := func(k string, rev int64) *clientv3.Event {
		return &clientv3.Event{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte(k), ModRevision: rev}}
	}
	q.apply([]*clientv3.Event{del("p/a", 20), del("p/c", 21)})
	select {
	case err := <-w.turn:
		if err != nil {
			t.Fatalf("W's turn: %v", err)
		}
		if w.follows != 11 {
			t.Errorf("W follows the key of revision %d, want C's (11)", w.follows)
		}
	default:
		t.Fatal("W not admitted once both keys ahead were gone")
	}
}
