-- A waiter says that it waits for the name, for the next five seconds, so
-- that its release sends a NOTIFY; it looks at the lock again after this.
UPDATE {{table}} SET waiting_until = GREATEST(waiting_until, now() + interval '5 seconds')
WHERE lock_key = $1
