-- Remove the value of the candidacy (2nd parameter) from the row (1st),
-- while the row still names it: before its release unlocks the name, and
-- after a forced release ended its connection.
UPDATE {{table}} SET elect = NULL, elect_value = NULL, adv_mark = NULL
WHERE lock_key = ? AND owner = ? AND elect = owner
