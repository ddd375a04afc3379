-- The candidacies among lease mode's holds: acquisition id and value.
SELECT owner, elect_value FROM {{table}}
WHERE elect = owner AND expires_at > UTC_TIMESTAMP(6) AND expires_at < '9999-12-31'
