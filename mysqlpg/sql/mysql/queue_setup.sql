-- A queue connection that goes silent for longer than this (whole seconds,
-- rounded up) is closed by the server, which frees the queue lock it may
-- hold: a waiter that heads a name's queue and then stops (a frozen or
-- dead process, a host gone) would otherwise keep every other client out
-- of the name until MySQL's own wait_timeout (8 hours by default). A live
-- head sends a statement at least every 20ms; a waiter behind it is inside
-- its GET_LOCK, which is no idle time.
SET SESSION wait_timeout = ?
