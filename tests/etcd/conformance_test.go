package etcd_test

import (
	"fmt"
	"net/url"
	"testing"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
)

// The conformance suite, faults included (the harness's proxies pass TLS
// through), over mutual TLS as a user whose role allows only the lock
// prefix, its password read from a file, with auth tokens that expire
// after three idle seconds. It is the suite's only run on etcd (scripts/test
// runs this package on etcd 3.7 and 3.4): a run without TLS and auth
// skipped nothing this one does not, and repeated every subtest for
// nothing but the transport, which every other test here uses.
func TestConformanceTLS(t *testing.T) {
	s := startTLS(t)
	// Its connection would reconnect after the server restarts, in the
	// middle of a subtest's goroutine leak check.
	s.root.Close()
	conformance.Run(t, func(t *testing.T) conformance.Harness {
		h := newHarness(t, s.member)
		h.inspector.Close()
		h.inspector = s.rootClient(t)
		h.prefix = fmt.Sprintf("/tls/%d", prefixes.Add(1))
		h.url = func(addr, prefix string) string {
			return s.url(addr, "padlock", "", prefix, url.Values{"password_file": {s.pwFile}})
		}
		return h
	}, conformance.Promises(promised))
}

// promised is what etcd promises (docs/guarantees.md, docs/etcd.md): the
// suite fails a Locker that reports other Capabilities.
var promised = padlock.Capabilities{Consistency: padlock.CP, FairFIFO: true, MonotonicTokens: true,
	FencingSurvivesFailover: true, PushWakeup: true, DoneBeforeRegrant: true,
	SharedLocks: true, Limits: true, Elections: true}
