-- After GET_LOCK granted the name: bump its fencing counter and record the
-- holder. A row that a lease-mode client holds on the same table is left
-- alone (0 affected rows, and the caller unlocks): one table serves one
-- mode; so is a row whose advisory key differs from this client's.
-- Affected rows: 1 for an insert (token 1), 2 for an update (the token
-- from LAST_INSERT_ID). The update is advisory_upsert.sql, which
-- advisory_try_acquire.sql and advisory_elect_acquire.sql share.
INSERT INTO {{table}} (lock_key, name, token, owner, host, pid, acquired_at, expires_at, adv_key, holder)
VALUES (?, ?, 1, ?, ?, ?, UTC_TIMESTAMP(6), '9999-12-31', ?, ?)
{{include:advisory_upsert}}
