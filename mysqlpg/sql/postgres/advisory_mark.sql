-- A holding session's mark, taken once by the first candidacy on the
-- session and held while it lives: a session-level advisory lock on a
-- random key $1. A candidacy's row names its session's mark (adv_mark), and
-- it is the leader only while the session that holds the name's lock also
-- holds that mark: a row left by a session that died (or by one whose
-- backend pid a new session reuses) is no leader. One row: granted.
SELECT pg_try_advisory_lock($1)
