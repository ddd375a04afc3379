-- lease_holders.sql on a table with readers and permits (migration 3):
-- the same columns, then each hold's kind (NULL: a writer), limit, and
-- whether it is a slot row (a reader or permit) rather than a name row.
-- A name row that its group owns (no owner) is not a hold.
SELECT name, token, owner, host, pid, holder,
       (extract(epoch FROM now() - acquired_at) * 1000000)::bigint,
       (extract(epoch FROM expires_at - now()) * 1000000)::bigint,
       NULL::bigint, -- no session holds a lease
       kind, lim, parent IS NOT NULL
FROM {{table}}
WHERE owner IS NOT NULL AND expires_at > now() AND expires_at < 'infinity'
