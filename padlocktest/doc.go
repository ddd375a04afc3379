// Package padlocktest starts real lock servers for tests, in the manner of
// net/http/httptest: etcd, Redis (one server, RedLock masters, a Redis
// Cluster), ZooKeeper, PostgreSQL and MySQL (MariaDB), each on free loopback
// ports, with the padlock URL that reaches it, stopped when the test ends.
// Nothing is a mock: a test that takes a lock takes it on the real server.
//
//	srv := padlocktest.Start(t, padlocktest.Redis)
//	l, err := padlock.Open(ctx, srv.URL())
//
// A server's nodes can be killed, paused, resumed and restarted, and a
// client can be given a path of its own (Server.Proxy) that can be cut,
// blackholed or made to drop answers, to test what an application does
// when its lock is lost; Silent is an endpoint that accepts connections
// and never answers, to test that a client gives up on a hung server.
//
// # Providers
//
// Servers come from a provider, chosen by PADLOCK_SERVERS (or the
// Provider option):
//
//   - local: binaries on this machine, as the Debian packages install them
//     (redis-server and redis-tools, zookeeper, postgresql, mariadb-server).
//     etcd needs nothing installed: padlocktest builds its embedded etcd v3.7
//     server (cmd/padlock-etcd) with the go command, or runs the etcd binary
//     that PADLOCK_ETCD_BINARY names.
//   - containers: containers from public images (testcontainers-go), on
//     whatever engine it finds (Docker, Podman); one node per kind, except
//     RedLock's masters. Images can be overridden with PADLOCK_IMAGE_ETCD,
//     PADLOCK_IMAGE_REDIS, PADLOCK_IMAGE_ZOOKEEPER, PADLOCK_IMAGE_POSTGRES and
//     PADLOCK_IMAGE_MYSQL.
//   - auto (the default): local when the kind's binaries are here, else
//     containers when an engine answers.
//
// When neither can run a kind, Start skips the test with a message that
// names both ways to fix it, unless PADLOCK_REQUIRE_SERVERS=1, which makes
// it a failure (for CI, where a skipped suite is a hole).
package padlocktest
