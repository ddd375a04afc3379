// Package driverkit is the kit for writing a padlock driver: the helpers
// that padlock's own drivers share, for third-party drivers to use too. It
// is not the contract: what a driver must implement and return is package
// backends (Driver, Hold, Grant, the sentinel errors), and nothing here is
// required. A driver that uses the kit reads its URL the way every padlock
// backend does, and reports outages the way the portable layer expects.
//
// What is here, by concept:
//
//   - URL parameters: Query and CheckParams (a strict query: a part that does
//     not parse is backends.ErrInvalidURL, an unknown parameter
//     backends.ErrInvalidOption), BoolParam, IntParam, DurationParam,
//     Timeouts (dial_timeout, request_timeout), Hosts and Credentials.
//   - Secrets and TLS: Password with PasswordParams (password_file=,
//     password_env=), TLSConfig with TLSParams (ca=, cert=, key=,
//     server_name=), SecurityParams for both.
//   - Reachability: Probe and ProbeTLS, which name the cause of an outage
//     that a client library keeps to itself.
//   - Request bounds and outages: WithRequestTimeout (DefaultRequestTimeout,
//     ErrNoAnswer), RequestError and Unavailable, which classify a failed
//     request as backends.ErrUnavailable with its cause kept, or as the
//     caller's own context error.
//   - Background cleanup: Janitor retries what must not outlive its use (a
//     cancelled waiter's queue entry, a lost hold's key) until the server
//     answers; Wait waits for a WaitGroup or a context.
//   - Identities and keys: NewID (one per acquisition), IdentityOf (what
//     Holders reports), EscapeName (a lock name as one keyspace segment),
//     ClusterSlot (a key's Redis Cluster slot).
package driverkit
