-- A reader's grant on PostgreSQL that writes its slot row alone: readers
-- join a live group at once instead of queueing for the name row's
-- exclusive lock (shared_grant.sql). Run in the transaction that holds the
-- name row FOR KEY SHARE (shared_share.sql). It grants only where writing
-- nothing else keeps every rule of the exclusive grant:
-- * the name row is a live group of readers whose lease already outlasts
--   the new slot's (the exclusive grant makes it last a quarter of a lease
--   longer), so the row writers wait on need not change;
-- * one of the slot rows made so far is free: chosen by the acquisition id,
--   so that readers joining at once spread over the free slots, and taken
--   by a conditional upsert, so that of two readers that chose the same
--   slot one gets it and the other is refused here; the upsert reads the
--   slot as it is now, not as the snapshot showed it, and never lowers its
--   token (a slot that a reader took and gave back since the snapshot
--   keeps a token above this one's: the join takes the next);
-- * the token is one more than the greatest on the name's slot rows, where
--   every reader's token since the group's last exclusive grant is, and at
--   most the name row's token, which that grant raised by a reservation:
--   a later writer's token (the name row's plus one) is above every
--   reader's. The join is granted as of its statement's snapshot (no
--   writer can come between that and its commit while the join's lease
--   lasts: its lock keeps out every FOR UPDATE, and a writer's upsert
--   takes the row only once the group's lease, which outlasts the join's,
--   has ended), so its token is above that of every hold that ended
--   before the reader asked (shared_leave.sql).
-- * no writer waits for the name (waiting_until): a row lock that need not
--   wait does not queue behind one that waits (a locker that need not
--   wait goes first), so readers joining one after another could keep
--   the row's FOR UPDATE from it; once a writer says that it waits,
--   readers take the exclusive path, which queues in turn. The writer's
--   mark updates the row (FOR NO KEY UPDATE), which the joins' FOR KEY
--   SHARE does not hold off.
-- Refused here, the reader takes the exclusive path.
-- $1 lock_key, $2 the name's bytes, $3 the lease in microseconds, $4
-- acquisition id, $5 host, $6 pid, $7 reentrancy owner (or NULL), $8 name.
-- One row back: the token and the slot's key, both NULL if not granted.
WITH n AS (
    SELECT token, slots, now() + $3 * interval '1 microsecond' AS until
    FROM {{table}}
    WHERE lock_key = $1::bytea AND owner IS NULL AND kind = 'S' AND lim = 1 AND slots > 0
      AND expires_at < 'infinity' AND expires_at >= now() + $3 * interval '1 microsecond'
      AND (waiting_until IS NULL OR waiting_until <= now())
),
s AS (
    SELECT i, sha256($2::bytea || decode('00736c6f7400', 'hex') || convert_to(i::text, 'UTF8')) AS key
    FROM n, generate_series(0, n.slots - 1) AS i
),
v AS (
    -- Each slot row by its key (LIMIT 1 keeps the lookup on the index, as
    -- in shared_grant.sql); a slot without a row is free.
    SELECT s.i, s.key, l.token, COALESCE(l.owner IS NOT NULL AND l.expires_at > now(), false) AS live
    FROM s LEFT JOIN LATERAL (SELECT owner, expires_at, token FROM {{table}} WHERE lock_key = s.key LIMIT 1) l ON true
),
c AS (
    SELECT (SELECT max(token) FROM v) + 1 AS token,
           (SELECT key FROM v WHERE NOT live ORDER BY md5($4::text || i::text) LIMIT 1) AS key
),
p AS (
    INSERT INTO {{table}} AS l (lock_key, name, token, owner, host, pid, holder, acquired_at, expires_at, kind, lim, parent)
    SELECT c.key, $8::text, c.token, $4::text, $5::text, $6::integer, $7::text, now(), n.until, 'S', 1, $1::bytea
    FROM c CROSS JOIN n WHERE c.key IS NOT NULL AND c.token <= n.token
    ON CONFLICT (lock_key) DO UPDATE
    SET name = EXCLUDED.name, token = GREATEST(EXCLUDED.token, l.token + 1), owner = EXCLUDED.owner,
        host = EXCLUDED.host, pid = EXCLUDED.pid,
        holder = EXCLUDED.holder, acquired_at = EXCLUDED.acquired_at, expires_at = EXCLUDED.expires_at,
        kind = EXCLUDED.kind, lim = EXCLUDED.lim, parent = EXCLUDED.parent
    WHERE (l.owner IS NULL OR l.expires_at <= now()) AND l.token < (SELECT token FROM n)
    RETURNING l.lock_key, l.token
)
SELECT (SELECT token FROM p), (SELECT lock_key FROM p)
