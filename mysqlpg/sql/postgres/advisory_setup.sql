-- A holding session that goes silent for longer than its TTL is ended by
-- the server, which frees its advisory locks: no earlier than the lost-lock
-- notice fires on the client.
SELECT set_config('idle_session_timeout', $1, false)
