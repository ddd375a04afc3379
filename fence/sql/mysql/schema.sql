-- The token table of package fence on MySQL and MariaDB: one row per
-- resource ever written under a token, holding the highest token seen for
-- it. Rows only ever rise and are never deleted. The resource is compared
-- byte for byte. {{table}}: the table's quoted name.
CREATE TABLE IF NOT EXISTS {{table}} (
    resource VARBINARY(255)  NOT NULL PRIMARY KEY,
    token    BIGINT UNSIGNED NOT NULL
) ENGINE=InnoDB
