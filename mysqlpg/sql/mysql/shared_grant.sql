-- A reader's or permit's grant on MySQL and MariaDB in one round trip: a
-- script of statements sent together (multiStatements, the arguments
-- interpolated into its first statement), as PostgreSQL's pipelined
-- transaction (postgres/shared_grant.sql) with the same rule. It makes the
-- name row if needed and locks it; reads the name's slot rows (after the
-- lock: every change to them locks the name row first; a READ COMMITTED
-- read sees the last committed); decides; and, granting, moves the
-- counter on and writes the lowest free slot's row. The slot keys derive
-- from the name as slotKey does in Go: SHA-256 of the name, a NUL, "slot",
-- a NUL and the index in decimal. The slot rows are read by their parent
-- column's index, and each keeps its own index in its slots column: the
-- lowest free is the least index of a row that is not live, or, with none
-- free, the next (every index below the name row's slots has a row). Read
-- instead as a recursive sequence of keys joined to the table, the slots
-- cost the server temporary tables at every call (the server's CPU before
-- and after: docs/benchmarks.md, "Before and after: MySQL's reader
-- scripts"). Rows that an earlier padlock wrote have no index there:
-- they are never reused, and new rows are added beside them. The script
-- keeps to few statements: the server answers each with a packet of its
-- own, which the client reads on its own, so each costs both sides a
-- system call and a wake-up; what a statement decides goes into session
-- variables that the next statements read (only the next: MariaDB
-- evaluates every right-hand side of a SET before it assigns any, so a
-- SET never reads what it assigns). Arguments: lock_key, the name's bytes,
-- kind, lim, the lease in microseconds, acquisition id, host, pid,
-- reentrancy owner (or NULL). The last statement's one row: the outcome
-- (G granted, B blocked, A a name of advisory mode, M another limit), the
-- token and the slot's key (granted), the microseconds until the soonest
-- blocking hold may expire (blocked), the limit of the name's holders (M).
SET @padlock_key = ?, @padlock_name = ?, @padlock_kind = ?, @padlock_lim = ?, @padlock_ttl = ?,
    @padlock_owner = ?, @padlock_host = ?, @padlock_pid = ?, @padlock_holder = ?,
    @padlock_out = NULL, @padlock_slot = NULL, @padlock_free = NULL,
    @padlock_held = 0, @padlock_soonest = NULL, @padlock_live = 0, @padlock_writer = 0,
    @padlock_advisory = 0, @padlock_group_lim = 1, @padlock_slots = 0, @padlock_expires = NULL, @padlock_until = NULL;
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
START TRANSACTION;
INSERT INTO {{table}} (lock_key, name, token, expires_at) VALUES (@padlock_key, @padlock_name, 0, '1000-01-01')
ON DUPLICATE KEY UPDATE lock_key = lock_key;
SELECT expires_at > UTC_TIMESTAMP(6), owner IS NOT NULL AND expires_at > UTC_TIMESTAMP(6),
       expires_at = '9999-12-31', COALESCE(lim, 1), COALESCE(slots, 0), expires_at,
       UTC_TIMESTAMP(6) + INTERVAL @padlock_ttl MICROSECOND
INTO @padlock_live, @padlock_writer, @padlock_advisory, @padlock_group_lim, @padlock_slots, @padlock_expires,
     @padlock_until
FROM {{table}} WHERE lock_key = @padlock_key FOR UPDATE;
SELECT COALESCE(MIN(IF(owner IS NOT NULL AND expires_at > UTC_TIMESTAMP(6), NULL, slots)), @padlock_slots),
       COALESCE(SUM(owner IS NOT NULL AND expires_at > UTC_TIMESTAMP(6)), 0),
       MIN(IF(owner IS NOT NULL AND expires_at > UTC_TIMESTAMP(6), expires_at, NULL))
INTO @padlock_free, @padlock_held, @padlock_soonest
FROM {{table}} WHERE parent = @padlock_key;
SET @padlock_slot = UNHEX(SHA2(CONCAT(@padlock_name, X'00736C6F7400', @padlock_free), 256)),
    @padlock_out = CASE
    WHEN @padlock_advisory THEN 'A'
    WHEN @padlock_writer AND @padlock_lim <> 1 THEN 'M'
    WHEN @padlock_live AND NOT @padlock_writer AND @padlock_group_lim <> @padlock_lim THEN 'M'
    WHEN @padlock_writer THEN 'B'
    WHEN @padlock_kind = 'P' AND @padlock_live AND @padlock_held >= @padlock_lim THEN 'B'
    ELSE 'G' END;
UPDATE {{table}}
SET expires_at = IF(expires_at > UTC_TIMESTAMP(6), GREATEST(expires_at, CAST(@padlock_until AS DATETIME(6))), CAST(@padlock_until AS DATETIME(6))),
    owner = NULL, host = NULL, pid = NULL, holder = NULL, acquired_at = NULL,
    kind = @padlock_kind, lim = @padlock_lim, slots = GREATEST(COALESCE(slots, 0), @padlock_free + 1),
    token = LAST_INSERT_ID(token + 1)
WHERE lock_key = @padlock_key AND @padlock_out = 'G';
INSERT INTO {{table}} (lock_key, name, token, owner, host, pid, holder, acquired_at, expires_at, kind, lim, parent, slots)
SELECT @padlock_slot, @padlock_name, LAST_INSERT_ID(), @padlock_owner, @padlock_host, @padlock_pid, @padlock_holder,
       UTC_TIMESTAMP(6), CAST(@padlock_until AS DATETIME(6)), @padlock_kind, @padlock_lim, @padlock_key, @padlock_free
FROM DUAL WHERE @padlock_out = 'G'
ON DUPLICATE KEY UPDATE
    name = VALUES(name), token = VALUES(token), owner = VALUES(owner), host = VALUES(host), pid = VALUES(pid),
    holder = VALUES(holder), acquired_at = VALUES(acquired_at), expires_at = VALUES(expires_at),
    kind = VALUES(kind), lim = VALUES(lim), parent = VALUES(parent), slots = VALUES(slots);
COMMIT;
SELECT @padlock_out, IF(@padlock_out = 'G', LAST_INSERT_ID(), NULL), IF(@padlock_out = 'G', @padlock_slot, NULL),
       IF(@padlock_out = 'B',
          GREATEST(COALESCE(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), IF(@padlock_writer, @padlock_expires, @padlock_soonest)), 0), 0), 0),
       @padlock_group_lim
