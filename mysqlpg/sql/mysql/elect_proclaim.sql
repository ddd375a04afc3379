-- Proclaim: replace the value (1st parameter) of the candidacy (3rd) of
-- the row (2nd), only while it holds (its lease runs, on the database's
-- clock). The lease (expires_at) is left as it is. Affected rows count
-- changed rows: 0 also when the value was already this one (elect_held.sql
-- tells the two apart).
UPDATE {{table}} SET elect_value = ?
WHERE lock_key = ? AND owner = ? AND elect = owner AND expires_at > UTC_TIMESTAMP(6) AND expires_at < '9999-12-31'
