-- Migration 4: the columns of elections, for a lock table made before they
-- existed. Nullable without a default, added at the end: an instant change
-- on MySQL 8 and MariaDB 10.3+; the statements of plain locks never name
-- them.
ALTER TABLE {{table}} ADD COLUMN elect VARCHAR(32) CHARACTER SET ascii NULL, ADD COLUMN elect_value VARBINARY(4096) NULL,
    ADD COLUMN adv_mark VARCHAR(64) CHARACTER SET ascii NULL
