-- Join a name's queue (queue.go): wait up to the given seconds for its
-- GET_LOCK name, which the server grants in the order asked. 1: this
-- connection heads the queue; 0: not yet; NULL: killed (a cancelled wait).
SELECT GET_LOCK(?, ?)
