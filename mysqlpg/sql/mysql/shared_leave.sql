-- A reader's release on MySQL and MariaDB in one round trip (a script, as
-- shared_grant.sql), that locks nothing but the reader's slot row while
-- other readers stay: readers leave side by side instead of queueing one
-- after another for the name row's exclusive lock (shared_free.sql, which
-- permits keep). As PostgreSQL's (shared_leave.sql, shared_last.sql,
-- shared_vacate.sql), in two transactions:
-- * the first, one statement that commits as it runs (autocommit), at READ
--   COMMITTED (no gap locks), frees the reader's slot row, found by the
--   parent column's index and its key: it reads and locks that one index
--   record, and never waits for another reader's slot row (a scan of the
--   name's slots would: InnoDB's semi-consistent read, which passes over
--   rows another transaction has locked, applies to the primary key's
--   scans only). Without the key (NULL), the slot is the one among the
--   name's that names the acquisition;
-- * then, read without a lock after that commit (of releases at once, the
--   last to commit sees every other), the group's row needs settling if it
--   outlasts its live slots by more than a quarter of the leaving reader's
--   lease (@padlock_quarter): none is live, or the reader that left had
--   renewed the group's lease past the others'. Only then does the second
--   transaction lock the name row, read the live slots again (a grant that
--   committed meanwhile is seen once the lock is had: every grant locks
--   the row first; at the session's level, REPEATABLE READ, the read after
--   the lock is the transaction's first, which takes its snapshot) and
--   make the group's row expire with the last of them, or free it if none
--   is left. Otherwise its statements are impossible WHEREs: they read
--   nothing and lock nothing, and the group's row keeps its lease, which
--   its live readers' renewals keep up and which ends at most a quarter of
--   a lease after the last of theirs.
-- The freed count and the acquisition id are kept as soon as the first
-- transaction committed (@padlock_freed, @padlock_left), so that after an
-- error later on the release is known to stand (pipeline.go,
-- leaveScript; the id tells them from an earlier script's on the same
-- connection). A release after expiry matches nothing. Arguments:
-- lock_key, acquisition id, the slot's key (or NULL), a quarter of the
-- lease in microseconds. The last statement's one row: slots freed.
SET @padlock_key = ?, @padlock_owner = ?, @padlock_slot = ?, @padlock_quarter = ?, @padlock_freed = 0,
    @padlock_left = NULL, @padlock_vacate = 0, @padlock_last = NULL;
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
UPDATE {{table}}
SET owner = NULL, host = NULL, pid = NULL, holder = NULL, acquired_at = NULL, expires_at = '1000-01-01'
WHERE parent = @padlock_key AND (@padlock_slot IS NULL OR lock_key = @padlock_slot)
  AND owner = @padlock_owner AND expires_at > UTC_TIMESTAMP(6);
SET @padlock_freed = ROW_COUNT(), @padlock_left = IF(ROW_COUNT() > 0, @padlock_owner, NULL);
SELECT COUNT(*) INTO @padlock_vacate
FROM {{table}} n
WHERE n.lock_key = @padlock_key AND @padlock_freed > 0 AND n.owner IS NULL AND n.kind = 'S'
  AND n.expires_at > UTC_TIMESTAMP(6) AND n.expires_at < '9999-01-01'
  AND NOT EXISTS (
      SELECT 1 FROM {{table}} l
      WHERE l.parent = n.lock_key AND l.owner IS NOT NULL AND l.expires_at > UTC_TIMESTAMP(6)
        AND l.expires_at >= n.expires_at - INTERVAL @padlock_quarter MICROSECOND);
START TRANSACTION;
SELECT 1 INTO @padlock_locked FROM {{table}} WHERE lock_key = @padlock_key AND @padlock_vacate > 0 FOR UPDATE;
SELECT MAX(expires_at) INTO @padlock_last FROM {{table}}
WHERE parent = @padlock_key AND @padlock_vacate > 0 AND owner IS NOT NULL AND expires_at > UTC_TIMESTAMP(6);
UPDATE {{table}}
SET expires_at = COALESCE(CAST(@padlock_last AS DATETIME(6)), '1000-01-01')
WHERE lock_key = @padlock_key AND @padlock_vacate > 0
  AND owner IS NULL AND expires_at > UTC_TIMESTAMP(6) AND expires_at < '9999-01-01';
COMMIT;
SELECT @padlock_freed
