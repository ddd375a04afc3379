-- The slot rows of a name whose row the transaction locked: key, owner,
-- live, microseconds left. {{in:keys}} is an array of the slot keys.
SELECT lock_key, owner, expires_at > now(),
       CASE WHEN expires_at > now() THEN floor(extract(epoch FROM (expires_at - now())) * 1000000)::bigint ELSE 0 END
FROM {{table}} WHERE lock_key = ANY({{in:keys}}) FOR UPDATE
