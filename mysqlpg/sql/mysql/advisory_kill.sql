-- Force release in advisory mode: end the holding connection, which
-- frees every GET_LOCK name it held.
KILL CONNECTION ?
