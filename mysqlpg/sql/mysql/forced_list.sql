-- The latest forced release of every name, kept for the given number of
-- microseconds at least: name, record (JSON: token and acquisition id),
-- and microseconds since, on the database's clock.
SELECT name, forced, TIMESTAMPDIFF(MICROSECOND, forced_at, UTC_TIMESTAMP(6))
FROM {{table}}
WHERE forced IS NOT NULL AND forced_at > UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND
