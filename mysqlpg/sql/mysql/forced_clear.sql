-- Withdraws the record of a forced release that did not happen.
UPDATE {{table}} SET forced = NULL, forced_at = NULL
WHERE lock_key = ? AND forced = ?
