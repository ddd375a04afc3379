-- A reader's grant on PostgreSQL that writes its slot row alone: readers
-- join a live group at once instead of queueing for the name row's
-- exclusive lock (shared_grant.sql). Run in the transaction that holds the
-- name row FOR KEY SHARE (shared_share.sql). It grants only where writing
-- nothing else keeps every rule of the exclusive grant:
-- * the name row is a live group of readers whose lease already outlasts
--   the new slot's (the exclusive grant makes it last a quarter of a lease
--   longer), so the row writers wait on need not change;
-- * one of the name's slot rows is free: the first that no other
--   transaction has locked (FOR UPDATE SKIP LOCKED), so that readers
--   joining at once each take another instead of queueing for one; the
--   lock reads the row as it is now, not as the snapshot showed it (one
--   that a reader took since is passed over), and the grant never lowers
--   its token (one that a reader took and gave back since the snapshot
--   keeps a token above this one's: the join takes the next). With none
--   free, the name's next slot, if the group has room for it (the
--   exclusive grant gives it twice the slots its readers need), is
--   written anew: the slot whose index is the number of the name's slot
--   rows (its key derives from the name as slotKey does in Go), which
--   ON CONFLICT DO NOTHING refuses if another reader wrote it first (or
--   the rows are not numbered without a gap, as the joins before this one
--   left them: the exclusive grant then writes the lowest free slot);
-- * the token is one more than the greatest on the name's slot rows, where
--   every reader's token since the group's last exclusive grant is, and at
--   most the name row's token, which that grant raised by a reservation:
--   a later writer's token (the name row's plus one) is above every
--   reader's. The join is granted as of its statement's snapshot (no
--   writer can come between that and its commit while the join's lease
--   lasts: its lock keeps out every FOR UPDATE, and a writer's upsert
--   takes the row only once the group's lease, which outlasts the join's,
--   has ended), so its token is above that of every hold that ended
--   before the reader asked (shared_leave.sql).
-- * no writer waits for the name (waiting_until): a row lock that need not
--   wait does not queue behind one that waits (a locker that need not
--   wait goes first), so readers joining one after another could keep
--   the row's FOR UPDATE from it; once a writer says that it waits,
--   readers take the exclusive path, which queues in turn. The writer's
--   mark updates the row (FOR NO KEY UPDATE), which the joins' FOR KEY
--   SHARE does not hold off.
-- The slot rows are read by the parent column's index, in one scan for
-- the token and one for the free slot; the join used to look each slot up
-- by a key computed from the name (SHA-256 per slot, a lookup each), and
-- to choose among the free ones by a hash of the acquisition id, where
-- two readers that chose the same one refused one of them.
-- Refused here, the reader takes the exclusive path.
-- $1 lock_key, $2 the lease in microseconds, $3 acquisition id, $4 host,
-- $5 pid, $6 reentrancy owner (or NULL), $7 name, $8 the name's bytes.
-- One row back: the token and the slot's key, both NULL if not granted.
WITH n AS (
    SELECT token, slots, now() + $2 * interval '1 microsecond' AS until
    FROM {{table}}
    WHERE lock_key = $1::bytea AND owner IS NULL AND kind = 'S' AND lim = 1 AND slots > 0
      AND expires_at < 'infinity' AND expires_at >= now() + $2 * interval '1 microsecond'
      AND (waiting_until IS NULL OR waiting_until <= now())
),
m AS (
    SELECT max(l.token) + 1 AS token, count(*) AS made
    FROM {{table}} l WHERE l.parent = $1::bytea AND EXISTS (SELECT 1 FROM n)
),
f AS (
    SELECT l.lock_key FROM {{table}} l
    WHERE l.parent = $1::bytea AND (l.owner IS NULL OR l.expires_at <= now()) AND EXISTS (SELECT 1 FROM n)
    LIMIT 1 FOR UPDATE OF l SKIP LOCKED
),
p AS (
    UPDATE {{table}} AS l
    SET name = $7::text, token = GREATEST(m.token, l.token + 1), owner = $3::text, host = $4::text, pid = $5::integer,
        holder = $6::text, acquired_at = now(), expires_at = n.until, kind = 'S', lim = 1
    FROM f, m, n
    WHERE l.lock_key = f.lock_key AND m.token <= n.token AND l.token < n.token
    RETURNING l.lock_key, l.token
),
i AS (
    INSERT INTO {{table}} AS l (lock_key, name, token, owner, host, pid, holder, acquired_at, expires_at, kind, lim, parent)
    SELECT sha256($8::bytea || decode('00736c6f7400', 'hex') || convert_to(m.made::text, 'UTF8')), $7::text, m.token,
           $3::text, $4::text, $5::integer, $6::text, now(), n.until, 'S', 1, $1::bytea
    FROM m, n WHERE NOT EXISTS (SELECT 1 FROM f) AND m.made < n.slots AND m.token <= n.token
    ON CONFLICT (lock_key) DO NOTHING
    RETURNING l.lock_key, l.token
)
SELECT COALESCE((SELECT token FROM p), (SELECT token FROM i)), COALESCE((SELECT lock_key FROM p), (SELECT lock_key FROM i))
