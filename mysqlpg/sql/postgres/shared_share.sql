-- A reader's join (shared_join.sql), second statement of its pipelined
-- transaction: hold the name row FOR SHARE. Readers that join hold it
-- together; whatever else changes the name's row or decides on its slots
-- (a writer's grant, an exclusive grant of readers or permits, a permit's
-- release, the last reader's freeing of the group, a renewal) locks it
-- FOR UPDATE or updates it, so it waits for the joins under way and then
-- sees their slots, and a join that comes after it sees what it did.
-- $1 lock_key.
SELECT 1 FROM {{table}} WHERE lock_key = $1 FOR SHARE
