-- Adds the holder column to a lock table made before it existed.
ALTER TABLE {{table}} ADD COLUMN IF NOT EXISTS holder text
