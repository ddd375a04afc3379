-- A reader's or permit's row, its slot's, written once the slot's lock
-- was granted: token, acquisition id, identity, kind and limit, and its
-- session's mark, so that a row whose connection died is never taken as a
-- live hold. Parameters: slot row key, name, token, acquisition id, host,
-- pid, reentrancy owner, the slot's lock, kind, lim, the name row's key,
-- the mark.
INSERT INTO {{table}} (lock_key, name, token, owner, host, pid, holder, acquired_at, expires_at, adv_key,
                       kind, lim, parent, adv_mark)
VALUES (?, ?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6), '9999-12-31', ?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE
    name = VALUES(name), token = VALUES(token), owner = VALUES(owner), host = VALUES(host), pid = VALUES(pid),
    holder = VALUES(holder), acquired_at = VALUES(acquired_at), expires_at = VALUES(expires_at),
    adv_key = VALUES(adv_key), kind = VALUES(kind), lim = VALUES(lim), parent = VALUES(parent),
    adv_mark = VALUES(adv_mark)
