-- Leave a name's queue: the next waiter heads it.
SELECT RELEASE_LOCK(?)
