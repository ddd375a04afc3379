-- The live readers and permits of a name (parent $1), other than the
-- acquisition $2, whose kind or limit differs from $3 and $4: the limit
-- rule's conflicts. A reader's or permit's row is live while the session
-- that holds its advisory lock (shared for a reader, the slot's lock for
-- a permit) also holds the mark the row names: a row left by a session
-- that died names a mark nobody holds. One row at most: kind, limit.
SELECT t.kind, t.lim
FROM {{table}} t
JOIN pg_locks l ON l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
 AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
 AND ((l.classid::bigint << 32) | l.objid::bigint) = t.adv_key
 AND l.mode = CASE WHEN t.kind = 'S' THEN 'ShareLock' ELSE 'ExclusiveLock' END
JOIN pg_locks m ON m.locktype = 'advisory' AND m.granted AND m.objsubid = 1
 AND m.database = l.database AND m.pid = l.pid
 AND ((m.classid::bigint << 32) | m.objid::bigint) = t.adv_mark
WHERE t.parent = $1 AND t.owner <> $2 AND (t.kind <> $3 OR t.lim <> $4)
LIMIT 1
