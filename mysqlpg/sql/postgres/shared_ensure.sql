-- Readers and permits, first statement of their transaction: make the
-- name row (free, counter 0) unless it exists. $1 lock_key, $2 name.
INSERT INTO {{table}} (lock_key, name, token, expires_at) VALUES ($1, $2, 0, '-infinity')
ON CONFLICT (lock_key) DO NOTHING
