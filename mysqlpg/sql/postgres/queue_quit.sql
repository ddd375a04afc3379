-- Leave a name's queue without the name (a cancelled or failed wait).
SELECT pg_advisory_unlock($1::bigint)
