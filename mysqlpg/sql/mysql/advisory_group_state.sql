-- The name row's state for a reader or permit holding the gate: whether
-- a session holds the name's lock (a writer, or one about to write), and
-- whether the row is its group's. Parameters: the name's lock, the
-- marker, lock_key.
SELECT IS_USED_LOCK(?) IS NOT NULL, COALESCE(adv_key = ?, FALSE) FROM {{table}} WHERE lock_key = ?
