-- lease_holders.sql on a table with readers and permits (migration 3):
-- the same columns, then each hold's kind (NULL: a writer), limit, and
-- whether it is a slot row (a reader or permit) rather than a name row.
-- A name row that its group owns (no owner) is not a hold.
SELECT name, token, owner, host, pid, holder,
       TIMESTAMPDIFF(MICROSECOND, acquired_at, UTC_TIMESTAMP(6)),
       TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at),
       NULL, -- no connection holds a lease
       kind, lim, parent IS NOT NULL
FROM {{table}}
WHERE owner IS NOT NULL AND expires_at > UTC_TIMESTAMP(6) AND expires_at < '9999-01-01'
