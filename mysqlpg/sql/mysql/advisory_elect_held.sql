-- Whether the candidacy (2nd parameter) holds the row (1st) now, on this
-- connection, in advisory mode: after a Proclaim that changed no row. One
-- row, 1 or 0.
SELECT COUNT(*) FROM {{table}}
WHERE lock_key = ? AND owner = ? AND elect = owner AND expires_at = '9999-12-31'
  AND adv_key IS NOT NULL AND IS_USED_LOCK(adv_key) = CONNECTION_ID()
