-- The expiry of a lease of the given microseconds renewed now, for the
-- statements of one renewal transaction.
SELECT CAST(UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND AS CHAR)
