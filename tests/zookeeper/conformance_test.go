package zookeeper_test

import (
	"errors"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
	"github.com/padlock-go/padlock/padlocktest"
)

// The conformance suite, faults included (the harness's proxies pass TLS
// through), over mutual TLS, with digest auth whose password is read from
// a file. This is the suite's run on a standalone server: one without TLS
// would skip what it skips and repeat every subtest for nothing but the
// transport, which the ensemble's run and the other tests here use.
func TestConformanceTLS(t *testing.T) {
	srv, certs := startTLS(t)
	pwFile := padlocktest.SecretFile(t, "zk-tls-Pw-81c2")
	runSuite(t, srv, certs, url.Values{"digest": {"padlock"}, "password_file": {pwFile}}.Encode())
}

func TestConformanceEnsemble(t *testing.T) {
	needServers(t)
	runSuite(t, ensemble, nil, "")
}

// promised is what ZooKeeper promises (docs/guarantees.md,
// docs/zookeeper.md): the suite fails a Locker that reports other
// Capabilities.
var promised = padlock.Capabilities{Consistency: padlock.CP, FairFIFO: true, MonotonicTokens: true,
	FencingSurvivesFailover: true, PushWakeup: true, DoneBeforeRegrant: true,
	SharedLocks: true, Limits: true, Elections: true}

// runSuite runs the conformance suite, then checks that nothing is left
// under any subtest's lock root but the root itself: queue nodes are gone
// (the suite checks that) and so are their parents, container nodes the
// server removes once empty. The records of forced releases (root/forced)
// are kept on purpose.
func runSuite(t *testing.T, ens *padlocktest.Server, certs *padlocktest.Certs, query string) {
	var roots []string
	conformance.Run(t, func(t *testing.T) conformance.Harness {
		h := newTLSHarness(t, ens, certs, query)
		roots = append(roots, h.root)
		return h
	}, conformance.Promises(promised))
	t.Run("NothingUnderRoots", func(t *testing.T) {
		h := newTLSHarness(t, ens, certs, "")
		defer h.Close()
		for _, root := range roots {
			padlocktest.WaitFor(t, root+" empty after the suite", 30*time.Second, func() bool {
				kids, _, err := h.inspect.Children(root)
				kids = slices.DeleteFunc(kids, func(k string) bool { return k == "forced" })
				if err != nil && !errors.Is(err, zk.ErrNoNode) {
					t.Fatal(err)
				}
				return len(kids) == 0
			})
		}
	})
}
