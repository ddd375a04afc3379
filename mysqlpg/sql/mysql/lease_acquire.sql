-- One atomic statement: insert the row, or take it over if its lease has
-- expired and no one waits in the name's queue ahead of this connection,
-- bumping the fencing counter. The upsert locks the row and reads its
-- latest version whatever the isolation level. owner is assigned first,
-- and takes the new value only when the test passed; every later
-- assignment tests owner alone; UTC_TIMESTAMP(6) is fixed for the
-- statement; so all columns change or none do. A retry by the same
-- acquisition (its owner id) is granted again, so a statement whose answer
-- was lost can be sent again. Affected rows: 1 for an insert (token 1), 2
-- for a takeover (token from LAST_INSERT_ID), 0 when someone holds it.
--
-- The queue (queue.go) is the GET_LOCK name given last: its holder is the
-- head of the name's waiters, and a free row goes to the head's connection
-- alone, so a client that re-locks at once cannot pass waiters by. NULL:
-- no queue to respect (LockAll's transaction checks the queues itself).
--
-- LockAll's one transaction (lockall.go) sends it with a row per name, in
-- row-key order, and then counts the rows it took
-- (lease_acquire_all_check.sql); the loader makes the one-row form.
INSERT INTO {{table}} (lock_key, name, token, owner, host, pid, acquired_at, expires_at, holder)
VALUES {{rows:(?, ?, 1, ?, ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, ?)}}
ON DUPLICATE KEY UPDATE
    owner       = IF((expires_at <= UTC_TIMESTAMP(6) AND IFNULL(IS_USED_LOCK(?) = CONNECTION_ID(), TRUE))
                     OR owner <=> VALUES(owner), VALUES(owner), owner),
    token       = IF(owner <=> VALUES(owner), LAST_INSERT_ID(token + 1), token),
    name        = IF(owner <=> VALUES(owner), VALUES(name), name),
    host        = IF(owner <=> VALUES(owner), VALUES(host), host),
    pid         = IF(owner <=> VALUES(owner), VALUES(pid), pid),
    holder      = IF(owner <=> VALUES(owner), VALUES(holder), holder),
    acquired_at = IF(owner <=> VALUES(owner), VALUES(acquired_at), acquired_at),
    expires_at  = IF(owner <=> VALUES(owner), VALUES(expires_at), expires_at)
