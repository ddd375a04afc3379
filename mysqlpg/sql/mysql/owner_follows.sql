-- Not a statement: the assignments of a writer's upsert that follow owner,
-- which the upsert assigns first, the new acquisition id only when its
-- test passed (lease_acquire.sql and advisory_upsert.sql put them in with
-- {{include:owner_follows}}). MySQL assigns from left to right, each
-- assignment reading the columns assigned before it, so each of these
-- tests owner alone, and all columns change or none do; the token is
-- LAST_INSERT_ID(token + 1), so that the answer carries it.
    token       = IF(owner <=> VALUES(owner), LAST_INSERT_ID(token + 1), token),
    name        = IF(owner <=> VALUES(owner), VALUES(name), name),
    host        = IF(owner <=> VALUES(owner), VALUES(host), host),
    pid         = IF(owner <=> VALUES(owner), VALUES(pid), pid),
    holder      = IF(owner <=> VALUES(owner), VALUES(holder), holder),
    acquired_at = IF(owner <=> VALUES(owner), VALUES(acquired_at), acquired_at),
    expires_at  = IF(owner <=> VALUES(owner), VALUES(expires_at), expires_at)
