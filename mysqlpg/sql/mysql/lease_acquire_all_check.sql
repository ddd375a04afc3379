-- LockAll's one transaction, second statement: the rows that now name this
-- call's acquisition ids, with their tokens, while no name has a waiter in
-- its queue (the GET_LOCK names given last, one per name). All of them:
-- commit; fewer: roll back.
SELECT lock_key, token FROM {{table}}
WHERE lock_key IN ({{in:keys}}) AND owner IN ({{in:owners}})
    AND COALESCE({{rows:IS_USED_LOCK(?)}}) IS NULL
