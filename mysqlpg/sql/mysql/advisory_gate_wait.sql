-- Take a name's gate, waiting up to the given seconds: readers and
-- permits hold it for a few statements. 1: granted.
SELECT GET_LOCK(?, ?)
