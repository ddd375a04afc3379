-- A holding session's mark, taken once by the first candidacy on the
-- session and held while it lives: a GET_LOCK name of its own, random. A
-- candidacy's row names its session's mark (adv_mark), and it is the
-- leader only while the connection that holds the name's lock also holds
-- that mark: a row left by a connection that died (or by one whose
-- CONNECTION_ID a new connection reuses after a restart) is no leader.
-- 1: granted.
SELECT GET_LOCK(?, 0)
