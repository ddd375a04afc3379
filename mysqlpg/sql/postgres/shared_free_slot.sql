-- Two clauses of a WITH that shared_free.sql and shared_leave.sql
-- include: s, the keys of the name's slots, and r, the slot row that names
-- the acquisition freed (found among the name's slots, so that a grant
-- whose answer was lost can be released without knowing its slot), its
-- key returned. A release after expiry matches nothing. $1 lock_key, $2
-- the name's bytes, $3 acquisition id.
s AS (
    SELECT sha256($2::bytea || decode('00736c6f7400', 'hex') || convert_to(i::text, 'UTF8')) AS key
    FROM {{table}} n, generate_series(0, COALESCE(n.slots, 0) - 1) AS i
    WHERE n.lock_key = $1::bytea
),
r AS (
    UPDATE {{table}}
    SET owner = NULL, host = NULL, pid = NULL, holder = NULL, acquired_at = NULL, expires_at = '-infinity'
    WHERE lock_key = ANY(ARRAY(SELECT key FROM s)) AND owner = $3::text AND expires_at > now()
    RETURNING lock_key
)
