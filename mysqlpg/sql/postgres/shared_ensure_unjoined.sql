-- shared_ensure.sql for a reader's exclusive grant in the round trip of
-- its join (pipeline.go): the name row is made only if the join before it
-- did not grant (no slot row of the name names this acquisition). A join
-- that granted found the row there, and an insert whose key exists waits
-- for a transaction that is changing that row (a writer saying that it
-- waits, say): the joined reader would wait for it for nothing, up to its
-- request's bound. $1 lock_key, $2 name, $3 acquisition id.
INSERT INTO {{table}} (lock_key, name, token, expires_at)
SELECT $1::bytea, $2::text, 0, '-infinity'
WHERE NOT EXISTS (SELECT 1 FROM {{table}} s WHERE s.parent = $1::bytea AND s.owner = $3::text)
ON CONFLICT (lock_key) DO NOTHING
