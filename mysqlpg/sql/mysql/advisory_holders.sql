-- Every advisory-mode lock held now: the rows whose GET_LOCK name a
-- connection holds, as lease_holders.sql, with the holding connection's
-- id last (a force release ends that connection). The row names the
-- holder: it is written right after GET_LOCK granted the name.
SELECT name, token, owner, host, pid, holder,
       TIMESTAMPDIFF(MICROSECOND, acquired_at, UTC_TIMESTAMP(6)),
       NULL,
       IS_USED_LOCK(adv_key)
FROM {{table}}
WHERE adv_key IS NOT NULL AND IS_USED_LOCK(adv_key) IS NOT NULL
