-- A reader's exclusive grant when other readers may be joining
-- (pipeline.go): shared_hold.sql's lock, but a row that another
-- transaction holds is skipped instead of waited for. The grant after it
-- (shared_grant.sql) then finds no row it locked and answers L; the
-- reader tries to join the group that the lock's holder is likely making
-- instead of queueing behind it. $1 lock_key.
SELECT 1 FROM {{table}} WHERE lock_key = $1 FOR UPDATE SKIP LOCKED
