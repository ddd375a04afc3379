-- The lock table's publication, which WatchHolders' replication
-- connections decode (feed_pg.go): its inserts, updates and deletes, no
-- truncate. Like the table, it stays: it retains no WAL (a replication
-- slot would, and WatchHolders' slots are temporary).
CREATE PUBLICATION {{publication}} FOR TABLE {{table}} WITH (publish = 'insert, update, delete')
