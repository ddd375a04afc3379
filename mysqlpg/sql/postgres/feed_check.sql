-- Whether WatchHolders can follow the lock table by logical replication
-- (feed_pg.go): the server's wal_level (logical decoding needs
-- "logical"), whether the user may open a replication connection
-- (REPLICATION or superuser), and whether the table's publication ($1)
-- exists and publishes it.
SELECT current_setting('wal_level'),
       COALESCE((SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user), false),
       EXISTS (SELECT 1 FROM pg_publication p JOIN pg_publication_rel r ON r.prpubid = p.oid
               WHERE p.pubname = $1 AND r.prrelid = to_regclass($2))
