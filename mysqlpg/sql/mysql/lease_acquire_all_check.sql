-- LockAll's one transaction, second statement: the rows that now name this
-- call's acquisition ids, with their tokens. All of them: commit; fewer:
-- roll back.
SELECT lock_key, token FROM {{table}}
WHERE lock_key IN ({{in:keys}}) AND owner IN ({{in:owners}})
