-- Proclaim in advisory mode, on the candidacy's own connection: replace
-- the value (1st parameter) of the candidacy (3rd) of the row (2nd), only
-- while this connection holds the name's GET_LOCK. Affected rows count
-- changed rows: 0 also when the value was already this one
-- (advisory_elect_held.sql tells the two apart).
UPDATE {{table}} SET elect_value = ?
WHERE lock_key = ? AND owner = ? AND elect = owner AND expires_at = '9999-12-31'
  AND adv_key IS NOT NULL AND IS_USED_LOCK(adv_key) = CONNECTION_ID()
