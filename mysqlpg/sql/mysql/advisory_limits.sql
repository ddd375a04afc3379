-- The live readers and permits of a name, other than one acquisition,
-- whose kind or limit differs from the given ones: the limit rule's
-- conflicts. A row is live while the connection that holds its slot's
-- lock also holds the mark the row names: a row left by a connection that
-- died names a mark nobody holds. Parameters: the name row's key
-- (parent), acquisition id, kind, lim. One row at most: kind, limit.
SELECT kind, lim FROM {{table}}
WHERE parent = ? AND owner <> ? AND (kind <> ? OR lim <> ?)
  AND adv_key IS NOT NULL AND adv_mark IS NOT NULL AND IS_USED_LOCK(adv_key) = IS_USED_LOCK(adv_mark)
LIMIT 1
