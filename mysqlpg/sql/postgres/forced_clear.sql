-- Withdraws the record $2 of a forced release that did not happen.
UPDATE {{table}} SET forced = NULL, forced_at = NULL
WHERE lock_key = $1 AND forced = $2
