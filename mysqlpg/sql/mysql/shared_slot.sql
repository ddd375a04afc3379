-- A reader's or permit's own row, a slot of the name that the transaction
-- checked free, which keeps its index in its slots column (shared_grant.sql).
-- Parameters: slot key, name, token, acquisition id, host, pid, reentrancy
-- owner, expiry, kind, lim, the name row's key, the slot's index.
INSERT INTO {{table}} (lock_key, name, token, owner, host, pid, holder, acquired_at, expires_at, kind, lim, parent, slots)
VALUES (?, ?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6), CAST(? AS DATETIME(6)), ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE
    name = VALUES(name), token = VALUES(token), owner = VALUES(owner), host = VALUES(host), pid = VALUES(pid),
    holder = VALUES(holder), acquired_at = VALUES(acquired_at), expires_at = VALUES(expires_at),
    kind = VALUES(kind), lim = VALUES(lim), parent = VALUES(parent), slots = VALUES(slots)
