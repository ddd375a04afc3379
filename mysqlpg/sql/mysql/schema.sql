-- One row per lock name ever taken. The row is the name's fencing counter
-- (token only ever grows; the row is never deleted) and, while the lock is
-- held in lease mode, its holder. A free row has no owner and expires at
-- 1000-01-01; in advisory mode the lock itself is the GET_LOCK name adv_key
-- and expires_at is 9999-12-31, so that a lease-mode client on the same
-- table never takes a name that advisory mode uses. Times are UTC, on the
-- database's clock. Readers and permits hold slot rows of their own
-- (parent names the name row); while any is live, the name row has no
-- owner and expires with the last of them, so a writer's one upsert
-- (lease_acquire.sql) waits for them unchanged. A candidacy in an election
-- is the holder whose owner equals elect; it carries elect_value.
CREATE TABLE IF NOT EXISTS {{table}} (
    lock_key    BINARY(32)      NOT NULL PRIMARY KEY, -- sha256 of the name
    name        VARBINARY(512)  NOT NULL,
    token       BIGINT UNSIGNED NOT NULL,
    owner       VARCHAR(32) CHARACTER SET ascii NULL, -- acquisition id while held
    holder      VARBINARY(1024) NULL,                 -- the holder's reentrancy owner, if any
    host        VARCHAR(255) CHARACTER SET utf8mb4 NULL,
    pid         INT NULL,
    acquired_at DATETIME(6) NULL,
    expires_at  DATETIME(6) NOT NULL,
    adv_key     VARCHAR(64) CHARACTER SET ascii NULL, -- advisory mode: GET_LOCK name
    forced      VARCHAR(255) CHARACTER SET ascii NULL, -- the latest forced release: token and acquisition id
    forced_at   DATETIME(6) NULL,                     -- and when
    kind        CHAR(1) CHARACTER SET ascii NULL,     -- readers (S) or permits (P): a group row's, or a slot row's
    lim         INT NULL,                             -- the permits' limit (1 for readers)
    slots       INT NULL,                             -- a name row: slot rows made for it so far; a slot row: its index
    parent      BINARY(32) NULL,                      -- a slot row: its name row's lock_key
    elect       VARCHAR(32) CHARACTER SET ascii NULL, -- a candidacy's acquisition id: the holder is a leader while owner = elect
    elect_value VARBINARY(4096) NULL,                 -- and its value (padlock.MaxValueLen bytes at most)
    adv_mark    VARCHAR(64) CHARACTER SET ascii NULL  -- advisory mode: the candidacy's session mark (a GET_LOCK name)
) ENGINE=InnoDB
