-- A reader's or permit's grant on PostgreSQL in one statement, run in the
-- transaction that locked the name row (shared_hold.sql, or tried to:
-- shared_hold_skip.sql): it applies the
-- grant rule to the name's live holds and, if it grants, takes the lowest
-- free slot and the counter's next value; if not and the caller waits, it
-- says so in the name row (waiting_until, as lease_wait.sql does for a
-- writer), so that a release sends a NOTIFY. The slot keys derive from the name as slotKey does in Go:
-- sha256(name, NUL, "slot", NUL, the index in decimal).
-- $1 lock_key, $2 the name's bytes, $3 kind, $4 lim, $5 the lease in
-- microseconds, $6 whether the caller waits, $7 acquisition id, $8 host,
-- $9 pid, $10 reentrancy owner (or NULL), $11 name.
-- One row back: the outcome (G granted, B blocked, A a name of advisory
-- mode, M another limit, L the name row held by another transaction after
-- shared_hold_skip.sql), the token and the slot's key (granted), the
-- microseconds until the soonest blocking hold may expire (blocked), and
-- the limit of the name's holders (M).
WITH n AS (
    -- Only a row this transaction locked (its xmax is this transaction's
    -- id then): after shared_hold_skip.sql skipped it, nothing is decided.
    SELECT owner, expires_at, expires_at > now() AS live, expires_at = 'infinity' AS advisory,
           COALESCE(lim, 1) AS lim, COALESCE(slots, 0) AS slots, now() + $5 * interval '1 microsecond' AS until
    FROM {{table}} WHERE lock_key = $1::bytea AND xmax = pg_current_xact_id_if_assigned()::xid
),
s AS (
    SELECT i, sha256($2::bytea || decode('00736c6f7400', 'hex') || convert_to(i::text, 'UTF8')) AS key
    FROM n, generate_series(0, n.slots) AS i
),
v AS (
    -- Each slot row by its key (LIMIT 1 keeps the lookup a subquery: as a
    -- join, the planner, which guesses generate_series at 1000 rows, read
    -- the whole table into a hash instead).
    SELECT s.i, s.key, l.owner IS NOT NULL AND l.expires_at > now() AS live, l.expires_at
    FROM s LEFT JOIN LATERAL (SELECT owner, expires_at FROM {{table}} WHERE lock_key = s.key LIMIT 1) l ON true
),
c AS (
    SELECT n.*, (SELECT min(i) FROM v WHERE NOT v.live) AS free,
           (SELECT count(*) FROM v WHERE v.live) AS held,
           (SELECT min(expires_at) FROM v WHERE v.live) AS soonest
    FROM n
),
d AS (
    SELECT c.*,
           CASE WHEN c.advisory THEN 'A'
                WHEN c.live AND c.owner IS NOT NULL AND $4::integer <> 1 THEN 'M'
                WHEN c.live AND c.owner IS NULL AND c.lim <> $4::integer THEN 'M'
                WHEN c.live AND c.owner IS NOT NULL THEN 'B'
                WHEN $3::text = 'P' AND c.live AND c.held >= $4::integer THEN 'B'
                WHEN c.free IS NULL THEN 'B'
                ELSE 'G' END AS outcome,
           CASE WHEN c.live AND c.owner IS NOT NULL THEN c.expires_at ELSE c.soonest END AS blocker
    FROM c
),
u AS (
    -- Readers: the counter rises by a reservation, whose tokens readers
    -- that join (shared_join.sql) take; the group's lease outlasts the
    -- new slot's by a quarter of a lease, in which readers join without
    -- changing this row; and the name gets twice as many slots as this
    -- reader needs, so that joining readers find free ones (a slot whose
    -- row was never written is free). This reader's token is the
    -- reservation's first.
    UPDATE {{table}} AS t
    SET token = t.token + CASE WHEN $3::text = 'S' THEN 65536 ELSE 1 END,
        owner = NULL, host = NULL, pid = NULL, holder = NULL, acquired_at = NULL,
        kind = $3::text, lim = $4::integer,
        slots = GREATEST(COALESCE(t.slots, 0), CASE WHEN $3::text = 'S' THEN 2 * (d.free + 1) ELSE d.free + 1 END),
        expires_at = GREATEST(CASE WHEN t.expires_at > now() THEN t.expires_at END,
            d.until + CASE WHEN $3::text = 'S' THEN ($5::bigint / 4) * interval '1 microsecond' ELSE interval '0' END)
    FROM d WHERE t.lock_key = $1::bytea AND d.outcome = 'G'
    RETURNING t.token - CASE WHEN $3::text = 'S' THEN 65535 ELSE 0 END AS token, d.free
),
w AS (
    UPDATE {{table}} AS t
    SET waiting_until = GREATEST(t.waiting_until,
        GREATEST(d.blocker, now()) + interval '1 second')
    FROM d WHERE t.lock_key = $1::bytea AND d.outcome = 'B' AND $6::boolean
    RETURNING 1
),
p AS (
    INSERT INTO {{table}} AS l (lock_key, name, token, owner, host, pid, holder, acquired_at, expires_at, kind, lim, parent)
    SELECT s.key, $11::text, u.token, $7::text, $8::text, $9::integer, $10::text, now(), d.until, $3::text, $4::integer, $1::bytea
    FROM u JOIN s ON s.i = u.free CROSS JOIN d
    ON CONFLICT (lock_key) DO UPDATE
    SET name = EXCLUDED.name, token = EXCLUDED.token, owner = EXCLUDED.owner, host = EXCLUDED.host, pid = EXCLUDED.pid,
        holder = EXCLUDED.holder, acquired_at = EXCLUDED.acquired_at, expires_at = EXCLUDED.expires_at,
        kind = EXCLUDED.kind, lim = EXCLUDED.lim, parent = EXCLUDED.parent
    RETURNING l.lock_key, l.token
)
SELECT COALESCE(d.outcome, 'L'), (SELECT token FROM p), (SELECT lock_key FROM p),
       CASE WHEN d.blocker > now() THEN floor(extract(epoch FROM (d.blocker - now())) * 1000000)::bigint ELSE 0 END,
       COALESCE(d.lim, 0)
FROM (VALUES (1)) AS one LEFT JOIN d ON true
