-- Migration 5: the index of the parent column, over the rows that have
-- one (readers' and permits' rows): without it, every advisory reader's
-- and permit's check of the limit rule reads the whole table. Building it
-- blocks writes to the table for as long as the build takes.
CREATE INDEX IF NOT EXISTS {{parent_index}} ON {{table}} (parent) WHERE parent IS NOT NULL
