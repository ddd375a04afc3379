-- A forced release's record, written into the holder's row: the record
-- ($1, JSON: token and acquisition id) and, on the database's clock, when.
-- It matches the row only while it names the acquisition $3. One row
-- affected, or none if the lock changed hands.
UPDATE {{table}} SET forced = $1, forced_at = now()
WHERE lock_key = $2 AND owner = $3
