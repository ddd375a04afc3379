-- A forced release's record, written into the holder's row: the record
-- (JSON: token and acquisition id) and, on the database's clock in UTC,
-- when. It matches the row only while it names the acquisition. One row
-- affected, or none if the lock changed hands.
UPDATE {{table}} SET forced = ?, forced_at = UTC_TIMESTAMP(6)
WHERE lock_key = ? AND owner = ?
