-- Bound a queue connection (queue_pg.go): its waits for a queue's lock
-- (queue_enter.sql) to $1 milliseconds, after which the waiter asks again;
-- and, from PostgreSQL 14, its idle time to $2 milliseconds (the lease's
-- TTL), so that a queue's head whose client went silent leaves the queue
-- with its session (a live head takes a step at least every third of it).
SELECT set_config('lock_timeout', $1::text, false),
       CASE WHEN current_setting('server_version_num')::int >= 140000
            THEN set_config('idle_session_timeout', $2::text, false) END
