-- The leader of the election (the name's lock_key) in advisory mode: the
-- row, when it is a candidacy and the connection that holds the name's
-- GET_LOCK now also holds the mark the row names. A row whose connection
-- died, or that the next holder has not yet rewritten (GET_LOCK and the
-- row's upsert are two statements), is no leader.
SELECT token, elect_value FROM {{table}}
WHERE lock_key = ? AND elect = owner AND expires_at = '9999-12-31'
  AND adv_key IS NOT NULL AND adv_mark IS NOT NULL AND IS_USED_LOCK(adv_key) = IS_USED_LOCK(adv_mark)
