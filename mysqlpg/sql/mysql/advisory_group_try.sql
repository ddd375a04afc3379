-- A reader's or permit's try in advisory mode on MySQL and MariaDB, in one
-- round trip: a script of statements sent together (multiStatements; the
-- arguments interpolated where they stand), each one guarded by what the
-- statements before it found, so that the name's gate is held for one
-- round trip instead of one per statement (advisory_gate.go). In order:
-- take the gate, waiting for it on the server a little (others hold it for
-- one such script); put the name row in the group's state (as
-- advisory_group_enter.sql); read whether a session holds the name's lock
-- (a writer: read once, so that a writer seen is never granted beside) and
-- whether the row is the group's (advisory_group_state.sql) and, with no
-- writer, take the first free of the candidate slots' locks (the CASE
-- stops at its first granted GET_LOCK); granted, take the counter's next
-- value and write the slot's row (as advisory_slot_row.sql); refused by a
-- writer or with no slot free, put the row back if this try flipped it
-- (advisory_group_leave.sql). Those writes are one transaction: a writer's
-- upsert meanwhile waits for its commit and then finds the group's row.
-- After the commit, look for a live hold of another kind or limit
-- (advisory_limits.sql; every grant commits before its own look, so of two
-- grants with different limits the later look sees the earlier grant) and
-- give the gate back. A failure part-way leaves the session's locks
-- unknown: the caller ends the session.
--
-- Arguments: lock_key, name, the group's marker, the name's lock, the
-- gate, kind, lim, acquisition id, host, pid, reentrancy owner (or NULL),
-- the session's mark, the gate's wait in seconds, and the slot locks' base
-- (the advisory key's input for slot i is the base and i in decimal:
-- advisory.slotLock). {{case:slots}} becomes one arm per slot asked for,
-- "WHEN GET_LOCK(?, 0) = 1 THEN i + 1", with the slot's lock as its
-- argument. The slot granted gets its lock derived here from the base (the
-- caller checks it against its own), and its row key derives from the name
-- as slotKey does: SHA-256 of the name, a NUL, "slot", a NUL and the index
-- in decimal. The last statement's one row: gate taken, the row the
-- group's, a writer, the slot granted plus one (0: none), token, the
-- slot's lock, the kind and limit of a live hold that breaks the limit
-- rule ("P 4"; NULL: none), and the gate's release.
SET @pl_key = ?, @pl_name = ?, @pl_marker = ?, @pl_lock = ?, @pl_gate = ?, @pl_kind = ?, @pl_lim = ?,
    @pl_owner = ?, @pl_host = ?, @pl_pid = ?, @pl_holder = ?, @pl_mark = ?, @pl_wait = ?, @pl_base = ?,
    @pl_flip = 0, @pl_writer = NULL, @pl_group = NULL, @pl_pos = 0, @pl_token = NULL, @pl_slot = NULL;
SET @pl_in = GET_LOCK(@pl_gate, @pl_wait);
START TRANSACTION;
INSERT INTO {{table}} (lock_key, name, token, acquired_at, expires_at, adv_key)
SELECT @pl_key, @pl_name, 0, UTC_TIMESTAMP(6), '9999-12-31', @pl_marker FROM DUAL WHERE @pl_in = 1
ON DUPLICATE KEY UPDATE
    adv_key = IF(expires_at = '9999-12-31' AND (adv_key IS NULL OR adv_key = @pl_lock), VALUES(adv_key), adv_key);
SELECT ROW_COUNT() > 0, IS_USED_LOCK(@pl_lock) IS NOT NULL, COALESCE(adv_key = @pl_marker, FALSE)
INTO @pl_flip, @pl_writer, @pl_group
FROM {{table}} WHERE lock_key = @pl_key AND @pl_in = 1;
SET @pl_pos = IF(@pl_group AND NOT @pl_writer, CASE {{case:slots}} ELSE 0 END, 0);
UPDATE {{table}} SET token = LAST_INSERT_ID(token + 1) WHERE lock_key = @pl_key AND @pl_pos > 0;
SET @pl_token = IF(@pl_pos > 0 AND ROW_COUNT() = 1, LAST_INSERT_ID(), NULL),
    @pl_slot = IF(@pl_pos > 0, CONCAT('padlock:', LEFT(SHA2(CONCAT(@pl_base, @pl_pos - 1), 256), 56)), NULL);
INSERT INTO {{table}} (lock_key, name, token, owner, host, pid, holder, acquired_at, expires_at, adv_key,
                       kind, lim, parent, adv_mark)
SELECT UNHEX(SHA2(CONCAT(@pl_name, X'00736C6F7400', @pl_pos - 1), 256)), @pl_name, @pl_token, @pl_owner, @pl_host, @pl_pid, @pl_holder,
       UTC_TIMESTAMP(6), '9999-12-31', @pl_slot, @pl_kind, @pl_lim, @pl_key, @pl_mark
FROM DUAL WHERE @pl_token IS NOT NULL
ON DUPLICATE KEY UPDATE
    name = VALUES(name), token = VALUES(token), owner = VALUES(owner), host = VALUES(host), pid = VALUES(pid),
    holder = VALUES(holder), acquired_at = VALUES(acquired_at), expires_at = VALUES(expires_at),
    adv_key = VALUES(adv_key), kind = VALUES(kind), lim = VALUES(lim), parent = VALUES(parent),
    adv_mark = VALUES(adv_mark);
UPDATE {{table}} SET adv_key = @pl_lock
WHERE lock_key = @pl_key AND adv_key = @pl_marker AND @pl_flip AND @pl_group AND (@pl_writer OR @pl_pos = 0);
COMMIT;
SELECT @pl_in = 1, COALESCE(@pl_group, FALSE), COALESCE(@pl_writer, FALSE), @pl_pos, @pl_token, @pl_slot,
       (SELECT CONCAT(kind, ' ', COALESCE(lim, 1)) FROM {{table}}
        WHERE parent = @pl_key AND owner <> @pl_owner AND (kind <> @pl_kind OR lim <> @pl_lim)
          AND adv_key IS NOT NULL AND adv_mark IS NOT NULL AND IS_USED_LOCK(adv_key) = IS_USED_LOCK(adv_mark)
          AND @pl_token IS NOT NULL
        LIMIT 1),
       IF(@pl_in = 1, RELEASE_LOCK(@pl_gate), 0)
