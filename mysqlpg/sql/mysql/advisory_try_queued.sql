-- A waiting writer's try in advisory mode (queue.go): GET_LOCK on the
-- name's advisory key without waiting, but only while nobody waits in the
-- name's queue or the given connection (the caller's queue connection;
-- 0 outside the queue, which no connection has as its id) holds the queue
-- lock. Arguments: queue key, the caller's queue connection id (twice), the
-- advisory key. 1: granted to this session; 0: held, or others go first;
-- NULL: error.
SELECT IF(COALESCE(IS_USED_LOCK(?), ?) = ?, GET_LOCK(?, 0), 0)
