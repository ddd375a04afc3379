-- The head of a name's queue in advisory mode waits on its queue
-- connection for the name's advisory key to be released (queue.go's
-- waitReleased): the server wakes a GET_LOCK waiter at its holder's
-- release, and the key is given back in the same statement. Arguments:
-- the key, the key, the seconds to wait at most, the key.
-- -1: the key is free (readers or permits hold the name, or it was just
-- released): no wait. 1: released while it waited. 0: the wait ran out,
-- or was killed (a cancelled wait).
SELECT IF(IS_FREE_LOCK(?), -1, IF(GET_LOCK(?, ?) = 1, RELEASE_LOCK(?), 0))
