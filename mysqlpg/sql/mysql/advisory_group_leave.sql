-- Put the name row back in the writer's state (adv_key the name's lock):
-- a reader or permit that found a writer, or a writer that found no live
-- reader or permit, holding the gate. Parameters: the name's lock,
-- lock_key, the marker.
UPDATE {{table}} SET adv_key = ? WHERE lock_key = ? AND adv_key = ?
