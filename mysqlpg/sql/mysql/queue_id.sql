-- A waiting connection's id on the server: what a cancelled wait kills
-- (queue_kill.sql).
SELECT CONNECTION_ID()
