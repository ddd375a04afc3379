-- The expiry of a lease of $1 microseconds renewed now, for the
-- statements of one renewal transaction.
SELECT now() + $1 * interval '1 microsecond'
