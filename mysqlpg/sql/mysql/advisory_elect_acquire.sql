-- A candidacy's acquisition in advisory mode, after GET_LOCK granted the
-- name: advisory_acquire.sql, which also marks the row a candidacy (elect,
-- the acquisition id, given again as the 8th parameter) with its value
-- (9th) and its session's mark (10th), after advisory_upsert.sql's
-- assignments, testing owner and adv_key as they do. Affected rows: 1 for an insert
-- (token 1), 2 for an update (the token from LAST_INSERT_ID).
INSERT INTO {{table}} (lock_key, name, token, owner, host, pid, acquired_at, expires_at, adv_key, holder, elect, elect_value, adv_mark)
VALUES (?, ?, 1, ?, ?, ?, UTC_TIMESTAMP(6), '9999-12-31', ?, ?, ?, ?, ?)
{{include:advisory_upsert}},
    elect       = IF(owner <=> VALUES(owner) AND adv_key <=> VALUES(adv_key), VALUES(elect), elect),
    elect_value = IF(owner <=> VALUES(owner) AND adv_key <=> VALUES(adv_key), VALUES(elect_value), elect_value),
    adv_mark    = IF(owner <=> VALUES(owner) AND adv_key <=> VALUES(adv_key), VALUES(adv_mark), adv_mark)
