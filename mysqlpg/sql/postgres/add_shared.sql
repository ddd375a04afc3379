-- Migration 3: the columns of readers and permits, for a lock table made
-- before they existed. Nullable without a default: PostgreSQL adds them
-- without rewriting the table.
ALTER TABLE {{table}} ADD COLUMN IF NOT EXISTS kind char(1), ADD COLUMN IF NOT EXISTS lim integer,
    ADD COLUMN IF NOT EXISTS slots integer, ADD COLUMN IF NOT EXISTS parent bytea
