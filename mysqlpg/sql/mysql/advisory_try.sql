-- 1: granted to this session; 0: held by another; NULL: error.
SELECT GET_LOCK(?, 0)
