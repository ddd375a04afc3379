-- Adds the record of the latest forced release to a lock table made
-- before it existed.
ALTER TABLE {{table}} ADD COLUMN forced VARCHAR(255) CHARACTER SET ascii NULL, ADD COLUMN forced_at DATETIME(6) NULL
