-- A reader's or permit's release on MySQL and MariaDB in one round trip (a
-- script, as shared_grant.sql): lock the name row, free the slot row that
-- names the acquisition (found among the name's slot rows by their parent
-- column's index, so that a grant whose answer was lost can be released
-- without knowing its slot), and make the group's row expire with its last
-- live slot (or free, if none is left). The slot rows are read by that
-- index, not as a recursive sequence of their keys joined to the table,
-- which cost the server temporary tables and the better part of the
-- release; the last live slot's expiry goes through a variable, so that
-- no statement reads the table it updates, read with the count of slots
-- freed (ROW_COUNT() of the statement before): few statements, as in
-- shared_grant.sql. A release after expiry matches
-- nothing. Arguments: lock_key, acquisition id. The last statement's one
-- row: slots freed.
SET @padlock_key = ?, @padlock_owner = ?, @padlock_freed = 0, @padlock_last = NULL;
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
START TRANSACTION;
SELECT 1 INTO @padlock_locked FROM {{table}} WHERE lock_key = @padlock_key FOR UPDATE;
UPDATE {{table}}
SET owner = NULL, host = NULL, pid = NULL, holder = NULL, acquired_at = NULL, expires_at = '1000-01-01'
WHERE parent = @padlock_key AND owner = @padlock_owner AND expires_at > UTC_TIMESTAMP(6);
SELECT ROW_COUNT(), MAX(expires_at) INTO @padlock_freed, @padlock_last FROM {{table}}
WHERE parent = @padlock_key AND owner IS NOT NULL AND expires_at > UTC_TIMESTAMP(6);
UPDATE {{table}}
SET expires_at = COALESCE(CAST(@padlock_last AS DATETIME(6)), '1000-01-01')
WHERE lock_key = @padlock_key AND owner IS NULL AND expires_at > UTC_TIMESTAMP(6) AND expires_at < '9999-01-01'
  AND @padlock_freed > 0;
COMMIT;
SELECT @padlock_freed
