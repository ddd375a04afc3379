-- Not a statement: the last two assignments of advisory mode's ON
-- DUPLICATE KEY UPDATE clause on MySQL (advisory_upsert_set.sql has the
-- rest): adv_key, then expires_at, which every assignment before tests.
    adv_key     = IF((expires_at = '9999-12-31' AND (adv_key IS NULL OR adv_key = VALUES(adv_key))) OR expires_at <= UTC_TIMESTAMP(6), VALUES(adv_key), adv_key),
    expires_at  = IF((expires_at = '9999-12-31' AND (adv_key IS NULL OR adv_key = VALUES(adv_key))) OR expires_at <= UTC_TIMESTAMP(6), VALUES(expires_at), expires_at)
