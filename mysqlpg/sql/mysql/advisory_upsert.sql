-- Not a statement: the ON DUPLICATE KEY UPDATE clause of advisory mode's
-- row on MySQL, which advisory_acquire.sql, advisory_try_acquire.sql and
-- advisory_elect_acquire.sql put in with {{include:advisory_upsert}} (a
-- candidacy adds its own assignments after it). As in lease_acquire.sql,
-- owner is assigned first, and takes the new acquisition id only when the
-- test passed: the row is an advisory row of this advisory key, or one
-- whose lease has expired (a lease-mode row on the same table is left
-- alone, and so is another advisory key's). Every later assignment tests
-- owner alone (owner_follows.sql), so the test is made once (it was made
-- for every column: docs/sql.md has what that cost). owner is a new id per
-- acquisition, so it equals VALUES(owner) after the first assignment only
-- if the test passed.
ON DUPLICATE KEY UPDATE
    owner       = IF((expires_at = '9999-12-31' AND (adv_key IS NULL OR adv_key = VALUES(adv_key)))
                     OR expires_at <= UTC_TIMESTAMP(6), VALUES(owner), owner),
    adv_key     = IF(owner <=> VALUES(owner), VALUES(adv_key), adv_key),
{{include:owner_follows}}
