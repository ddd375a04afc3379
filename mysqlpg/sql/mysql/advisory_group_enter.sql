-- A reader or permit, holding the name's gate: put the name row in its
-- group's state (adv_key the group's marker, a GET_LOCK name nobody
-- takes), making the row if needed, so that a writer's upsert
-- (advisory_acquire.sql, unchanged) refuses it and the writer checks for
-- live readers and permits. A row in the writer's state (adv_key the
-- name's lock) changes; one already the group's, or a lease-mode row, is
-- left alone. Parameters: lock_key, name, the marker, the name's lock.
-- Affected rows: 1 made, 2 changed, 0 left alone.
INSERT INTO {{table}} (lock_key, name, token, acquired_at, expires_at, adv_key)
VALUES (?, ?, 0, UTC_TIMESTAMP(6), '9999-12-31', ?)
ON DUPLICATE KEY UPDATE
    adv_key = IF(expires_at = '9999-12-31' AND (adv_key IS NULL OR adv_key = ?), VALUES(adv_key), adv_key)
