-- The leader of the election (the name's lock_key) in lease mode: the
-- row's live holder when it is a candidacy, with its token and value. No
-- row: no leader (free, expired on the database's clock, or a plain lock).
SELECT token, elect_value FROM {{table}}
WHERE lock_key = ? AND elect = owner AND expires_at > UTC_TIMESTAMP(6) AND expires_at < '9999-12-31'
