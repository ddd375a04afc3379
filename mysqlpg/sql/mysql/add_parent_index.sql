-- Migration 5: the index of the parent column: without it, every advisory
-- reader's and permit's check of the limit rule reads the whole table.
-- InnoDB builds it online.
ALTER TABLE {{table}} ADD INDEX {{parent_index}} (parent)
