-- Every lease-mode lock held now: name, token, acquisition id, host, pid,
-- reentrancy owner, and, on the database's clock, microseconds since it
-- was acquired and until it expires. Advisory-mode rows (expiring in
-- 9999) say nothing about who holds the advisory lock now.
SELECT name, token, owner, host, pid, holder,
       TIMESTAMPDIFF(MICROSECOND, acquired_at, UTC_TIMESTAMP(6)),
       TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at),
       NULL -- no connection holds a lease
FROM {{table}}
WHERE owner IS NOT NULL AND expires_at > UTC_TIMESTAMP(6) AND expires_at < '9999-01-01'
