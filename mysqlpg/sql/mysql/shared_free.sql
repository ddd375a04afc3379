-- A reader's or permit's release on MySQL and MariaDB in one round trip (a
-- script, as shared_grant.sql): lock the name row, free the slot row that
-- names the acquisition (found among the name's slots, so that a grant
-- whose answer was lost can be released without knowing its slot), and
-- make the group's row expire with its last live slot (or free, if none is
-- left). A release after expiry matches nothing. Arguments: lock_key, the
-- name's bytes, acquisition id. The last statement's one row: slots freed.
SET @padlock_key = ?, @padlock_name = ?, @padlock_owner = ?, @padlock_slots = 0, @padlock_freed = 0;
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
START TRANSACTION;
SELECT COALESCE(slots, 0) INTO @padlock_slots FROM {{table}} WHERE lock_key = @padlock_key FOR UPDATE;
UPDATE {{table}} l JOIN (
    WITH RECURSIVE seq (i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM seq WHERE i + 1 < @padlock_slots)
    SELECT UNHEX(SHA2(CONCAT(@padlock_name, X'00736C6F7400', seq.i), 256)) AS k FROM seq
) AS s ON l.lock_key = s.k
SET l.owner = NULL, l.host = NULL, l.pid = NULL, l.holder = NULL, l.acquired_at = NULL, l.expires_at = '1000-01-01'
WHERE l.owner = @padlock_owner AND l.expires_at > UTC_TIMESTAMP(6);
SET @padlock_freed = ROW_COUNT();
UPDATE {{table}}
SET expires_at = COALESCE((SELECT e FROM (
        SELECT MAX(l.expires_at) AS e FROM {{table}} l JOIN (
            WITH RECURSIVE seq (i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM seq WHERE i + 1 < @padlock_slots)
            SELECT UNHEX(SHA2(CONCAT(@padlock_name, X'00736C6F7400', seq.i), 256)) AS k FROM seq
        ) AS s ON l.lock_key = s.k
        WHERE l.owner IS NOT NULL AND l.expires_at > UTC_TIMESTAMP(6)) AS m), '1000-01-01')
WHERE lock_key = @padlock_key AND owner IS NULL AND expires_at > UTC_TIMESTAMP(6) AND expires_at < '9999-01-01'
  AND @padlock_freed > 0;
COMMIT;
SELECT @padlock_freed
