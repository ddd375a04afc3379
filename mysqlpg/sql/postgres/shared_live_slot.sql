-- A clause that shared_last.sql and shared_vacate.sql include: whether a
-- slot row of the name row n is live. $2 the name's bytes.
EXISTS (
    SELECT 1 FROM {{table}} l
    WHERE l.lock_key = ANY(ARRAY(
              SELECT sha256($2::bytea || decode('00736c6f7400', 'hex') || convert_to(i::text, 'UTF8'))
              FROM generate_series(0, COALESCE(n.slots, 0) - 1) AS i))
      AND l.owner IS NOT NULL AND l.expires_at > now())
