-- A candidacy's acquisition: lease_acquire.sql, which also marks the row a
-- candidacy (elect, the acquisition id, given again as the 8th parameter)
-- with its value (the 9th), in the same statement as the grant. As there,
-- every assignment tests the old expires_at, assigned last, and owner,
-- which takes the new value only when the test passed. Affected rows: 1
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
