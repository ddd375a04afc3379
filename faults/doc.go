// Package faults is padlock's fault suite, in the manner of Jepsen: it runs
// lock clients (workers) as separate processes against real servers
// (padlocktest), each reaching the server and the protected resource
// through a proxy of its own, injects real faults (pauses, kills, cuts,
// server crashes), records a history on one monotonic clock, and checks it:
// overlapping critical sections, stale writes the resource accepted or
// rejected, lost updates, whether a lost lock's Done came before another
// client's grant, how long detection and recovery took, and what was left
// on the server. The holder scenarios run again with the recipes' holds
// as victims (readers, permits, multi-locks, leaders: see Kind), whose
// invariants the checker knows: no writer beside anyone, never more than
// n permits, no two multi-locks over a common name, one leader at a time,
// and fenced writes accepted only in token order. The protected resource's
// fenced register is package fence's HTTP middleware (fenced.go), so every
// stale-write check runs through the code users ship.
//
// `padlock faults` runs it, prints the table, writes a Report
// (results.json) and renders the docs' generated sections from one
// (RenderDoc); the package's tests run a short version of every scenario
// and assert each backend's expected outcome: the measured outcome must
// fall within the range its expectation allows (see Outcome).
package faults
