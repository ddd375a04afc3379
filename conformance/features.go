package conformance

import (
	"errors"
	"slices"
	"strings"
)

// Feature names what some subtests need beyond the Harness interface: a
// fault the harness injects (its optional interface), or an optional part
// of the portable API that the backend behind it offers.
type Feature string

// The features. Each fault feature is the optional interface of the same
// name; Holders is the backend's Inspector and ForceReleaser, reached
// through Locker.Holders and Locker.ForceUnlock; Successor is the
// backend's holds naming the hold they followed (backends.Successor),
// reached through the padlock.handoff.duration metric.
const (
	FeatureCut        Feature = "Cutter"
	FeatureKill       Feature = "Killer"
	FeatureRestart    Feature = "Restarter"
	FeatureBlackhole  Feature = "Blackholer"
	FeatureStop       Feature = "Stopper"
	FeatureSilentOpen Feature = "SilentOpener"
	FeatureFailover   Feature = "Failoverer"
	FeatureHolders    Feature = "Holders"
	FeatureSuccessor  Feature = "Successor"
)

// faultFeatures are the features that take a client or a server away: a
// subtest that uses one may leave state that only a lease's end removes.
var faultFeatures = []Feature{FeatureCut, FeatureKill, FeatureRestart, FeatureBlackhole, FeatureStop, FeatureFailover}

// Features lists every Feature, in the order the subtests first need them.
var Features = []Feature{FeatureCut, FeatureKill, FeatureRestart, FeatureBlackhole,
	FeatureStop, FeatureSilentOpen, FeatureFailover, FeatureHolders, FeatureSuccessor}

// Limited is implemented by harnesses that cannot offer every Feature: it
// names each one they lack and why. The suite expects every Feature a
// harness does not name here. A subtest that needs a feature the harness
// declared missing is skipped with that reason; one whose feature is
// neither there nor declared missing fails (an interface a harness
// silently stopped implementing, a fault method or a backend that answers
// errors.ErrUnsupported), so that a lost check shows as a failure, never
// as a quiet skip.
type Limited interface {
	Unsupported() map[Feature]string
}

// unsupported reads h's declaration, and fails t on a feature the suite
// does not know (a typo would otherwise excuse nothing and mean nothing).
func unsupported(t interface {
	Helper()
	Fatalf(string, ...any)
}, h Harness) map[Feature]string {
	t.Helper()
	l, ok := h.(Limited)
	if !ok {
		return nil
	}
	out := l.Unsupported()
	for f, why := range out {
		if !slices.Contains(Features, f) {
			t.Fatalf("harness declares unknown feature %q unsupported (known: %v)", f, Features)
		}
		if strings.TrimSpace(why) == "" {
			t.Fatalf("harness declares %s unsupported without saying why", f)
		}
	}
	return out
}

// need returns the harness's implementation of the interface of feature
// f. It skips the subtest if the harness declared f unsupported, and fails
// it if the harness neither implements nor declared it.
func need[T any](e *env, f Feature) T {
	e.Helper()
	e.skipDeclared(f)
	if slices.Contains(faultFeatures, f) {
		e.faulted = true // its leftovers may outlive Close (finish)
	}
	impl, ok := e.h.(T)
	if !ok {
		e.Fatalf("harness %T does not implement %s and does not declare it unsupported (Limited)", e.h, f)
	}
	return impl
}

// skipDeclared skips the subtest if the harness declared f unsupported.
func (e *env) skipDeclared(f Feature) {
	e.Helper()
	if why, ok := e.unsupported[f]; ok {
		e.Skipf("harness declares no %s: %s", f, why)
	}
}

// injected checks the outcome of a fault the harness was asked for: an
// errors.ErrUnsupported is a skip only if the harness declared f
// unsupported (else a failure), any other error a failure.
func (e *env) injected(f Feature, err error) {
	e.Helper()
	if err == nil {
		return
	}
	if errors.Is(err, errors.ErrUnsupported) {
		e.skipDeclared(f)
		e.Fatalf("harness answered %v for %s, which it does not declare unsupported", err, f)
	}
	e.Fatalf("%s: %v", f, err)
}
