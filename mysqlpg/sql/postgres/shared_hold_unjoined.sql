-- A reader's exclusive grant in the round trip of its join (pipeline.go),
-- after the join's transaction committed: shared_hold_skip.sql's lock,
-- taken only if the join did not grant, that is if no slot row of the
-- name names this acquisition (read by the parent column's index). A join
-- that granted leaves the row unlocked here, and the grant after it
-- (shared_grant.sql) finds no row it locked and answers L, changing
-- nothing. $1 lock_key, $2 acquisition id.
SELECT 1 FROM {{table}} WHERE lock_key = $1::bytea
  AND NOT EXISTS (SELECT 1 FROM {{table}} s WHERE s.parent = $1::bytea AND s.owner = $2::text)
FOR UPDATE SKIP LOCKED
