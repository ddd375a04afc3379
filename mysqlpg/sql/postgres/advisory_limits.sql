-- The live readers and permits of a name (parent $1), other than the
-- acquisition $2, whose kind or limit differs from $3 and $4: the limit
-- rule's conflicts. A reader's or permit's row is live while the session
-- that holds its advisory lock (shared for a reader, the slot's lock for
-- a permit) also holds the mark the row names: a row left by a session
-- that died names a mark nobody holds. The rows of another kind or limit
-- are read first, by the parent column's index; only when there are any
-- does the statement read pg_locks (the EXISTS is a one-time filter over
-- the join), which costs as much as the server has locks. One row at most:
-- kind, limit.
WITH c AS (
    SELECT kind, lim, adv_key, adv_mark FROM {{table}}
    WHERE parent = $1 AND owner <> $2 AND (kind <> $3 OR lim <> $4)
)
SELECT c.kind, c.lim
FROM c
JOIN pg_locks l ON l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
 AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
 AND ((l.classid::bigint << 32) | l.objid::bigint) = c.adv_key
 AND l.mode = CASE WHEN c.kind = 'S' THEN 'ShareLock' ELSE 'ExclusiveLock' END
JOIN pg_locks m ON m.locktype = 'advisory' AND m.granted AND m.objsubid = 1
 AND m.database = l.database AND m.pid = l.pid
 AND ((m.classid::bigint << 32) | m.objid::bigint) = c.adv_mark
WHERE EXISTS (SELECT 1 FROM c)
LIMIT 1
