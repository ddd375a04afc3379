-- A clause of a WITH that shared_free.sql and shared_leave.sql include:
-- r, the slot row that names the acquisition freed, its key returned. It
-- is found among the name's slot rows by the parent column's index, so
-- that a grant whose answer was lost can be released without knowing its
-- slot; the releases used to look for it among keys computed from the
-- name for every slot the name has, SHA-256 each (a reader's grant gives
-- the name twice the slots its readers need). A release after expiry
-- matches nothing. $1 lock_key, $2 acquisition id.
r AS (
    UPDATE {{table}}
    SET owner = NULL, host = NULL, pid = NULL, holder = NULL, acquired_at = NULL, expires_at = '-infinity'
    WHERE parent = $1::bytea AND owner = $2::text AND expires_at > now()
    RETURNING lock_key
)
