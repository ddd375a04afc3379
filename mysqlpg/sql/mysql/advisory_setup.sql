-- A holding session that goes silent for longer than its TTL is closed by
-- the server, which frees its locks: no earlier than the lost-lock notice
-- fires on the client. wait_timeout is in whole seconds (rounded up).
SET SESSION wait_timeout = ?
