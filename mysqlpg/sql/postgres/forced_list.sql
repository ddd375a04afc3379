-- The latest forced release of every name, kept for $1 microseconds at
-- least: name, record (JSON: token and acquisition id), and microseconds
-- since, on the database's clock.
SELECT name, forced, (extract(epoch FROM now() - forced_at) * 1000000)::bigint
FROM {{table}}
WHERE forced IS NOT NULL AND forced_at > now() - $1::bigint * interval '1 microsecond'
