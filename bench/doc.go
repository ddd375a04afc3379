// Package bench is padlock's benchmark: lock throughput and hand-off
// latency of padlock against the wire floor of each backend's client
// library, a round-trip floor, and the native lock clients (etcd's
// concurrency.Mutex, go-redsync, bsm/redislock, go-zookeeper's zk.Lock),
// measured side by side in one run on the same servers.
//
// Run drives the workloads (U1: one client, one name; U2: clients on
// distinct names; C1: waiters on one hot name; C2: a Zipfian key space)
// over every implementation of each backend, interleaved round by round,
// and checks mutual exclusion and token order on every acquisition: a
// violation fails the run. Its Report prints as a table, writes JSON and
// CSV, and draws charts. `padlock bench` is its command line;
// docs/benchmarks.md is rendered (RenderDoc) from the committed results of
// the runs its generated sections name.
//
// The package lives in a module of its own, so that the peers it compares
// against (and its charting) stay out of the library's go.mod.
package bench
