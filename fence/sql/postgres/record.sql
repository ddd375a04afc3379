-- Records a token for a resource unless a higher one is recorded, inside
-- the caller's transaction. The conflicting row is locked to the end of the
-- transaction whether or not the WHERE holds, so no other token for the
-- resource is checked until this transaction ends.
-- $1: the resource; $2: the token offered.
-- Returns one row (the token) when the token was recorded (at least the
-- highest), none when it is stale.
INSERT INTO {{table}} AS f (resource, token) VALUES ($1, $2)
ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token
 WHERE f.token <= EXCLUDED.token
RETURNING f.token
