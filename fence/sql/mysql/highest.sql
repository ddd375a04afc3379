-- The highest token recorded for a resource, read under the row lock that
-- record.sql took (a locking read sees the latest committed row, whatever
-- the transaction's snapshot).
-- ?1: the resource.
SELECT token FROM {{table}} WHERE resource = ? FOR UPDATE
