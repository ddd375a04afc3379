-- Not a statement: the ON DUPLICATE KEY UPDATE clause of advisory mode's
-- row on MySQL, which advisory_acquire.sql, advisory_try_acquire.sql and
-- advisory_elect_acquire.sql put in with {{include:advisory_upsert}} (a
-- candidacy adds its own assignments after it). The row is taken when it
-- is an advisory row of this advisory key, or one whose lease has expired;
-- a lease-mode row on the same table is left alone, and so is a row in the
-- readers' or permits' state (adv_key their marker) or another advisory
-- key's. owner and adv_key are assigned first, each with that test, and
-- take the new acquisition id and this advisory key only when it passed.
-- MySQL assigns from left to right, each assignment reading the columns
-- assigned before it, so every later assignment tests the two columns it
-- wrote (the test itself was written out for every column, nine times:
-- docs/sql.md has what that cost), and all columns change or none do.
-- owner alone would not do: an acquisition tries again with the same id,
-- and a row it wrote by a try whose answer was lost may since have gone to
-- readers, who change only its adv_key; adv_key alone is this key only
-- where the test passes, but owner makes that certain. The token is
-- LAST_INSERT_ID(token + 1), so that the answer carries it.
ON DUPLICATE KEY UPDATE
    owner       = IF((expires_at = '9999-12-31' AND (adv_key IS NULL OR adv_key = VALUES(adv_key)))
                     OR expires_at <= UTC_TIMESTAMP(6), VALUES(owner), owner),
    adv_key     = IF((expires_at = '9999-12-31' AND (adv_key IS NULL OR adv_key = VALUES(adv_key)))
                     OR expires_at <= UTC_TIMESTAMP(6), VALUES(adv_key), adv_key),
    token       = IF(owner <=> VALUES(owner) AND adv_key <=> VALUES(adv_key), LAST_INSERT_ID(token + 1), token),
    name        = IF(owner <=> VALUES(owner) AND adv_key <=> VALUES(adv_key), VALUES(name), name),
    host        = IF(owner <=> VALUES(owner) AND adv_key <=> VALUES(adv_key), VALUES(host), host),
    pid         = IF(owner <=> VALUES(owner) AND adv_key <=> VALUES(adv_key), VALUES(pid), pid),
    holder      = IF(owner <=> VALUES(owner) AND adv_key <=> VALUES(adv_key), VALUES(holder), holder),
    acquired_at = IF(owner <=> VALUES(owner) AND adv_key <=> VALUES(adv_key), VALUES(acquired_at), acquired_at),
    expires_at  = IF(owner <=> VALUES(owner) AND adv_key <=> VALUES(adv_key), VALUES(expires_at), expires_at)
