-- A candidacy's acquisition: lease_acquire.sql's grant without the name's
-- queue, which also marks the row a candidacy (elect, the acquisition id,
-- given again as the 8th parameter) with its value (the 9th), in the same
-- statement. Every assignment tests the row as it was: its lease has
-- expired, or its owner is this acquisition (a retry after a lost
-- answer). expires_at is assigned last, so every test reads the old
-- one; owner, assigned third, is this acquisition's afterwards only if the
-- test passed, so the tests after it agree. Affected rows: 1
-- for an insert (token 1), 2 for a takeover (token from LAST_INSERT_ID), 0
-- when someone holds it.
INSERT INTO {{table}} (lock_key, name, token, owner, host, pid, acquired_at, expires_at, holder, elect, elect_value)
VALUES (?, ?, 1, ?, ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, ?, ?, ?)
ON DUPLICATE KEY UPDATE
    token       = IF(expires_at <= UTC_TIMESTAMP(6) OR owner <=> VALUES(owner), LAST_INSERT_ID(token + 1), token),
    name        = IF(expires_at <= UTC_TIMESTAMP(6) OR owner <=> VALUES(owner), VALUES(name), name),
    owner       = IF(expires_at <= UTC_TIMESTAMP(6) OR owner <=> VALUES(owner), VALUES(owner), owner),
    host        = IF(expires_at <= UTC_TIMESTAMP(6) OR owner <=> VALUES(owner), VALUES(host), host),
    pid         = IF(expires_at <= UTC_TIMESTAMP(6) OR owner <=> VALUES(owner), VALUES(pid), pid),
    holder      = IF(expires_at <= UTC_TIMESTAMP(6) OR owner <=> VALUES(owner), VALUES(holder), holder),
    acquired_at = IF(expires_at <= UTC_TIMESTAMP(6) OR owner <=> VALUES(owner), VALUES(acquired_at), acquired_at),
    elect       = IF(expires_at <= UTC_TIMESTAMP(6) OR owner <=> VALUES(owner), VALUES(elect), elect),
    elect_value = IF(expires_at <= UTC_TIMESTAMP(6) OR owner <=> VALUES(owner), VALUES(elect_value), elect_value),
    expires_at  = IF(expires_at <= UTC_TIMESTAMP(6) OR owner <=> VALUES(owner), VALUES(expires_at), expires_at)
