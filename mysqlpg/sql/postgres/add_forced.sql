-- Adds the record of the latest forced release to a lock table made
-- before it existed.
ALTER TABLE {{table}} ADD COLUMN IF NOT EXISTS forced text, ADD COLUMN IF NOT EXISTS forced_at timestamptz
