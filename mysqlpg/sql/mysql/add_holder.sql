-- Adds the holder column to a lock table made before it existed.
ALTER TABLE {{table}} ADD COLUMN holder VARBINARY(1024) NULL
