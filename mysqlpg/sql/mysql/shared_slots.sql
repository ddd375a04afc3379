-- The slot rows of a name whose row the transaction locked: key, owner,
-- live, microseconds left. The in-list expands to one placeholder per
-- slot key.
SELECT lock_key, owner, expires_at > UTC_TIMESTAMP(6),
       IF(expires_at > UTC_TIMESTAMP(6), TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at), 0)
FROM {{table}} WHERE lock_key IN ({{in:keys}}) FOR UPDATE
