-- The candidacies among advisory mode's holds (as advisory_elect_leader.sql,
-- for every name): acquisition id and value.
SELECT owner, elect_value FROM {{table}}
WHERE elect = owner AND expires_at = '9999-12-31'
  AND adv_key IS NOT NULL AND adv_mark IS NOT NULL AND IS_USED_LOCK(adv_key) = IS_USED_LOCK(adv_mark)
