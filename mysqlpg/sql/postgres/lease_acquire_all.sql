-- LockAll's one request (lockall.go): every name as lease_acquire.sql takes
-- one, or none. $1, $2 and $3 are the names' row keys, names and fresh
-- acquisition ids, in row-key order, so that two of these statements lock
-- their common rows in one order. A data-modifying WITH runs to completion
-- and the statement is one transaction: when some row was held (fewer rows
-- came back than were asked for), the division by zero fails the statement
-- and undoes the rows it did take. No row back: nothing was taken.
--
-- $8 are the names' queue keys (lease_acquire.sql's $8), in the same
-- order: a name whose queue anyone holds (a waiter heads it) is not free,
-- even with its row expired, as a single try takes a free row only while
-- nobody is queued. Each is taken at transaction level, held to the
-- statement's end, as a single try takes its one.
WITH queues AS (
    SELECT bool_and(pg_try_advisory_xact_lock(q)) AS free FROM unnest($8::bigint[]) AS q
), up AS (
    INSERT INTO {{table}} AS l (lock_key, name, token, owner, host, pid, holder, acquired_at, expires_at)
    SELECT v.k, v.n, 1, v.o, $4, $5, $7, now(), now() + $6 * interval '1 microsecond'
    FROM unnest($1::bytea[], $2::text[], $3::text[]) AS v(k, n, o)
    ORDER BY v.k
    ON CONFLICT (lock_key) DO UPDATE
    SET token = l.token + 1, name = EXCLUDED.name, owner = EXCLUDED.owner, host = EXCLUDED.host,
        pid = EXCLUDED.pid, holder = EXCLUDED.holder, acquired_at = EXCLUDED.acquired_at, expires_at = EXCLUDED.expires_at
    WHERE l.expires_at <= now() OR l.owner = EXCLUDED.owner
    RETURNING l.lock_key, l.token
)
SELECT lock_key, token FROM up
WHERE 1 / CASE WHEN (SELECT free FROM queues) AND (SELECT count(*) FROM up) = cardinality($1::bytea[]) THEN 1 ELSE 0 END = 1
