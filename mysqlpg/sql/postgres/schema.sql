-- One row per lock name ever taken. The row is the name's fencing counter
-- (token only ever grows; the row is never deleted) and, while the lock is
-- held in lease mode, its holder. A free row has no owner and expires at
-- -infinity; in advisory mode the lock itself is the advisory lock adv_key
-- and expires_at is +infinity, so that a lease-mode client on the same
-- table never takes a name that advisory mode uses. A release sends a
-- NOTIFY only while waiting_until is in the future: an uncontended lock
-- never pays for one. Readers and permits hold slot rows of their own
-- (parent names the name row); while any is live, the name row has no
-- owner and expires with the last of them, so a writer's one upsert
-- (lease_acquire.sql) waits for them unchanged. A candidacy in an election
-- is the holder whose owner equals elect; it carries elect_value.
CREATE TABLE IF NOT EXISTS {{table}} (
    lock_key    bytea       PRIMARY KEY, -- sha256 of the name
    name        text        NOT NULL,
    token       bigint      NOT NULL,
    owner       text,                    -- acquisition id while held
    holder      text,                    -- the holder's reentrancy owner, if any
    host        text,
    pid         integer,
    acquired_at timestamptz,
    expires_at  timestamptz NOT NULL,    -- on the database's clock
    adv_key       bigint,                  -- advisory mode: pg_advisory_lock key
    waiting_until timestamptz,             -- until then, someone waits: releases NOTIFY
    forced        text,                    -- the latest forced release: token and acquisition id
    forced_at     timestamptz,             -- and when
    kind          char(1),                 -- readers (S) or permits (P): a group row's, or a slot row's
    lim           integer,                 -- the permits' limit (1 for readers)
    slots         integer,                 -- a name row: slot rows made for it so far
    parent        bytea,                   -- a slot row: its name row's lock_key
    elect         text,                    -- a candidacy's acquisition id: the holder is a leader while owner = elect
    elect_value   bytea,                   -- and its value
    adv_mark      bigint                   -- advisory mode: the candidacy's session mark (an advisory lock key)
)
