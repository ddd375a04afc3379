-- 1: released; 0: held by another session; NULL: nobody held it.
SELECT RELEASE_LOCK(?)
