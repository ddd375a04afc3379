-- Let go of every session-level advisory lock of a queue connection,
-- before a join that follows a failed one (queueConn.doubt): a wait for a
-- queue's lock that failed may have been granted it all the same, and a
-- second join would count it twice. A queue connection holds queue locks
-- only.
SELECT pg_advisory_unlock_all()
