-- A reader's or permit's grant: the name row's counter's next value, read
-- back with LAST_INSERT_ID. Parameter: lock_key.
UPDATE {{table}} SET token = LAST_INSERT_ID(token + 1) WHERE lock_key = ?
