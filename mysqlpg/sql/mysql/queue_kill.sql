-- End a cancelled wait in queue_enter.sql: the connection stays.
KILL QUERY ?
