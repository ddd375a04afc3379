-- Migration 3: the columns of readers and permits, for a lock table made
-- before they existed. Nullable without a default, added at the end: an
-- instant change on MySQL 8 and MariaDB 10.3+.
ALTER TABLE {{table}} ADD COLUMN kind CHAR(1) CHARACTER SET ascii NULL, ADD COLUMN lim INT NULL,
    ADD COLUMN slots INT NULL, ADD COLUMN parent BINARY(32) NULL
