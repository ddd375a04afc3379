-- The token table of package fence on PostgreSQL: one row per resource ever
-- written under a token, holding the highest token seen for it. Rows only
-- ever rise and are never deleted. {{table}}: the table's quoted name.
CREATE TABLE IF NOT EXISTS {{table}} (
    resource text   NOT NULL PRIMARY KEY,
    token    bigint NOT NULL CHECK (token > 0)
)
