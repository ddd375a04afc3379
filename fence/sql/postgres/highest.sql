-- The highest token recorded for a resource, after record.sql refused one
-- (the row is locked by this transaction already).
-- $1: the resource.
SELECT token FROM {{table}} WHERE resource = $1
