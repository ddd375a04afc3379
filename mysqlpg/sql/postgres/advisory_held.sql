-- Whether a writer holds the advisory lock $1, as a queue's head sees it
-- once it has said that it waits (queue_pg_advisory.go): the shared
-- lock is refused only while the exclusive one is held. It is taken for
-- this statement's implicit transaction alone, while the head holds the
-- queue's lock, so no exclusive try it could refuse is made meanwhile
-- (every other writer's try is refused by the queue's check), and a
-- reader's shared try is not refused by it. One row back: held.
SELECT NOT pg_try_advisory_xact_lock_shared($1)
