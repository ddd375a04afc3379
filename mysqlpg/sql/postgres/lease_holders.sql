-- Every lease-mode lock held now: name, token, acquisition id, host, pid,
-- reentrancy owner, and, on the database's clock, microseconds since it
-- was acquired and until it expires. Advisory-mode rows (expiring at
-- +infinity) say nothing about who holds the advisory lock now.
SELECT name, token, owner, host, pid, holder,
       (extract(epoch FROM now() - acquired_at) * 1000000)::bigint,
       (extract(epoch FROM expires_at - now()) * 1000000)::bigint,
       NULL::bigint -- no session holds a lease
FROM {{table}}
WHERE owner IS NOT NULL AND expires_at > now() AND expires_at < 'infinity'
