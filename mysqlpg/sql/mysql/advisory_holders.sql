-- Every advisory-mode lock held now: the rows whose GET_LOCK name a
-- connection holds, as lease_holders.sql, with the holding connection's
-- id (a force release ends that connection), then each hold's kind
-- (NULL: a writer), limit, whether it is a reader's or permit's row, and
-- the row's key. A name row counts while a connection holds its lock (a
-- writer: while readers or permits hold the name its adv_key is a marker
-- nobody locks); a reader's or permit's row while the connection that
-- holds its slot's lock also holds the mark the row names. The row names
-- the holder: it is written right after GET_LOCK granted the name.
SELECT name, token, owner, host, pid, holder,
       TIMESTAMPDIFF(MICROSECOND, acquired_at, UTC_TIMESTAMP(6)),
       NULL,
       IS_USED_LOCK(adv_key),
       kind, lim, parent IS NOT NULL, lock_key
FROM {{table}}
WHERE adv_key IS NOT NULL AND IS_USED_LOCK(adv_key) IS NOT NULL
  AND (parent IS NULL OR IS_USED_LOCK(adv_key) = IS_USED_LOCK(adv_mark))
