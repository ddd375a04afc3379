-- A clause that shared_last.sql and shared_vacate.sql include: the keys of
-- the slots of the name row n, as an array. $2 the name's bytes.
ARRAY(SELECT sha256($2::bytea || decode('00736c6f7400', 'hex') || convert_to(i::text, 'UTF8'))
      FROM generate_series(0, COALESCE(n.slots, 0) - 1) AS i)
