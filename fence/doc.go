// Package fence is the resource side of fencing tokens: it makes the
// storage you write to under a padlock lock refuse a write whose token is
// lower than the highest it has seen, so that a holder that lost its lock
// without knowing (paused, cut off) cannot overwrite a newer holder's work.
//
// Start with the helper for the store your data lives in; each checks the
// token, records it and applies your write in one atomic step, and returns
// a *StaleError (errors.Is ErrStale) when the token is stale:
//
//   - SQL: PostgresTable.Do or MySQLTable.Do (Table.Check inside your own
//     transaction, Table.CheckPgx with pgx), over a token table that
//     Table.Migrate makes;
//   - Redis and Redis Cluster: Redis, one Lua script;
//   - etcd: Etcd, one transaction;
//   - ZooKeeper: ZooKeeper, one multi;
//   - HTTP: Middleware on the service (409 Conflict to a stale token) and
//     Transport or SetHeader on the client.
//
// Tokens help only where they rise from holder to holder:
// Capabilities().MonotonicTokens is false on RedLock, and a Redis that
// loses its data restarts its counters. docs/fencing.md says when tokens
// help, what each helper stores and how to choose.
package fence
