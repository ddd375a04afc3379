-- Not a statement: the ON DUPLICATE KEY UPDATE clause of advisory mode's
-- row on MySQL up to its last two assignments (advisory_upsert_last.sql),
-- which advisory_acquire.sql, advisory_try_acquire.sql and
-- advisory_elect_acquire.sql put in with {{include:advisory_upsert_set}},
-- a candidacy's own assignments between the two. As in lease_acquire.sql,
-- every assignment tests the old expires_at, which is assigned last, and
-- adv_key, which changes only when the test passed; the token is
-- LAST_INSERT_ID(token + 1), so that the answer carries it.
ON DUPLICATE KEY UPDATE
    token       = IF((expires_at = '9999-12-31' AND (adv_key IS NULL OR adv_key = VALUES(adv_key))) OR expires_at <= UTC_TIMESTAMP(6), LAST_INSERT_ID(token + 1), token),
    name        = IF((expires_at = '9999-12-31' AND (adv_key IS NULL OR adv_key = VALUES(adv_key))) OR expires_at <= UTC_TIMESTAMP(6), VALUES(name), name),
    owner       = IF((expires_at = '9999-12-31' AND (adv_key IS NULL OR adv_key = VALUES(adv_key))) OR expires_at <= UTC_TIMESTAMP(6), VALUES(owner), owner),
    host        = IF((expires_at = '9999-12-31' AND (adv_key IS NULL OR adv_key = VALUES(adv_key))) OR expires_at <= UTC_TIMESTAMP(6), VALUES(host), host),
    pid         = IF((expires_at = '9999-12-31' AND (adv_key IS NULL OR adv_key = VALUES(adv_key))) OR expires_at <= UTC_TIMESTAMP(6), VALUES(pid), pid),
    holder      = IF((expires_at = '9999-12-31' AND (adv_key IS NULL OR adv_key = VALUES(adv_key))) OR expires_at <= UTC_TIMESTAMP(6), VALUES(holder), holder),
    acquired_at = IF((expires_at = '9999-12-31' AND (adv_key IS NULL OR adv_key = VALUES(adv_key))) OR expires_at <= UTC_TIMESTAMP(6), VALUES(acquired_at), acquired_at),
