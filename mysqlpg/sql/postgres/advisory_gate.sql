-- A permit's gate: the name's advisory lock $1 in shared mode, held with
-- the permit's slot, so that a writer (the lock in exclusive mode) and
-- permits exclude each other. One row: granted.
SELECT pg_try_advisory_lock_shared($1)
