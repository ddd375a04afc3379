-- Readers and permits on PostgreSQL, second statement of a pipelined
-- transaction (after shared_ensure.sql): lock the name row, so that the
-- statement after it reads the name's slot rows as the last transaction
-- that changed them left them (every change to a name's slot rows locks
-- its row first). $1 lock_key.
SELECT 1 FROM {{table}} WHERE lock_key = $1 FOR UPDATE
