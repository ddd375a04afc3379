-- Raises a resource's token to the one offered unless a higher one is
-- recorded, inside the caller's transaction, locking the row to the end of
-- the transaction; highest.sql then reads what is recorded (above the
-- offered token: stale).
-- ?1: the resource; ?2: the token offered.
INSERT INTO {{table}} (resource, token) VALUES (?, ?)
ON DUPLICATE KEY UPDATE token = GREATEST(token, VALUES(token))
