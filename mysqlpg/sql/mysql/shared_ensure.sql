-- Readers and permits, first statement of their transaction: make the
-- name row (free, counter 0) unless it exists, locking it either way.
-- Parameters: lock_key, name.
INSERT INTO {{table}} (lock_key, name, token, expires_at) VALUES (?, ?, 0, '1000-01-01')
ON DUPLICATE KEY UPDATE lock_key = lock_key
