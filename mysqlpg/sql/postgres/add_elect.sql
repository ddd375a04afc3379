-- Migration 4: the columns of elections, for a lock table made before they
-- existed. Nullable without a default: PostgreSQL adds them without
-- rewriting the table, and the statements of plain locks never name them.
ALTER TABLE {{table}} ADD COLUMN IF NOT EXISTS elect text, ADD COLUMN IF NOT EXISTS elect_value bytea,
    ADD COLUMN IF NOT EXISTS adv_mark bigint
