-- One atomic statement: insert the row, or take it over if its lease has
-- expired, bumping the fencing counter. The upsert locks the row and reads
-- its latest version whatever the isolation level. Every assignment tests
-- the old expires_at, which is assigned last, and owner, which takes the new
-- value only when the test passed; UTC_TIMESTAMP(6) is fixed for the
-- statement; so all columns change or none do. A retry by the same
-- acquisition (its owner id) is granted again, so a statement whose answer
-- was lost can be sent again. Affected rows: 1 for
-- an insert (token 1), 2 for a takeover (token from LAST_INSERT_ID), 0 when
-- someone holds it. LockAll's one transaction (lockall.go) sends it with a
-- row per name, in row-key order, and then counts the rows it took
-- (lease_acquire_all_check.sql); the loader makes the one-row form.
INSERT INTO {{table}} (lock_key, name, token, owner, host, pid, acquired_at, expires_at, holder)
VALUES {{rows:(?, ?, 1, ?, ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, ?)}}
ON DUPLICATE KEY UPDATE
    token       = IF(expires_at <= UTC_TIMESTAMP(6) OR owner <=> VALUES(owner), LAST_INSERT_ID(token + 1), token),
    name        = IF(expires_at <= UTC_TIMESTAMP(6) OR owner <=> VALUES(owner), VALUES(name), name),
    owner       = IF(expires_at <= UTC_TIMESTAMP(6) OR owner <=> VALUES(owner), VALUES(owner), owner),
    host        = IF(expires_at <= UTC_TIMESTAMP(6) OR owner <=> VALUES(owner), VALUES(host), host),
    pid         = IF(expires_at <= UTC_TIMESTAMP(6) OR owner <=> VALUES(owner), VALUES(pid), pid),
    holder      = IF(expires_at <= UTC_TIMESTAMP(6) OR owner <=> VALUES(owner), VALUES(holder), holder),
    acquired_at = IF(expires_at <= UTC_TIMESTAMP(6) OR owner <=> VALUES(owner), VALUES(acquired_at), acquired_at),
    expires_at  = IF(expires_at <= UTC_TIMESTAMP(6) OR owner <=> VALUES(owner), VALUES(expires_at), expires_at)
