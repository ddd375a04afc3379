-- The slot rows of a name whose row the transaction locked: key, owner,
-- live, microseconds left. The in-list expands to one placeholder per
-- slot key.
SELECT lock_key, owner, expires_at > now(),
       CASE WHEN expires_at > now() THEN floor(extract(epoch FROM (expires_at - now())) * 1000000)::bigint ELSE 0 END
FROM {{table}} WHERE lock_key IN ({{in:keys}}) FOR UPDATE
