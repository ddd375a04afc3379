-- A writer's try in advisory mode and, when granted, its row, in one
-- round trip: GET_LOCK on the name's advisory key without waiting, but
-- only while nobody waits in the name's queue or the given connection
-- holds the queue lock (the head of the queue: queue.go), and, if it granted,
-- advisory_acquire.sql's upsert of the row. LAST_INSERT_ID(x) in the
-- WHERE puts GET_LOCK's answer where the OK packet carries it, and the
-- update's LAST_INSERT_ID(token + 1) overrides it with the token.
-- Arguments: advisory_acquire.sql's seven, then the queue key, the
-- caller's queue connection id (twice) and the advisory key.
-- Affected rows and insert id: 1 and 1, an insert (token 1); 2 and the
-- token, an update; 0 and 0, refused (held, or others go first); 0 and
-- 1, granted, but the row was left alone (readers' or permits' state, a
-- lease-mode row, another advisory key): the caller holds the lock and
-- must look further or let it go.
INSERT INTO {{table}} (lock_key, name, token, owner, host, pid, acquired_at, expires_at, adv_key, holder)
SELECT ?, ?, 1, ?, ?, ?, UTC_TIMESTAMP(6), '9999-12-31', ?, ? FROM DUAL
WHERE LAST_INSERT_ID(IF(COALESCE(IS_USED_LOCK(?), ?) = ?, GET_LOCK(?, 0), 0)) = 1
{{include:advisory_upsert}}
