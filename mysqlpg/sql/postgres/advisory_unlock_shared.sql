-- Release one shared hold of the advisory lock $1 (a reader, or a
-- permit's gate). One row: whether this session held it.
SELECT pg_advisory_unlock_shared($1)
