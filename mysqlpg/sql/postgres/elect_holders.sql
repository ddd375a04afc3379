-- The candidacies among lease mode's holds: acquisition id and value.
SELECT owner, elect_value FROM {{table}}
WHERE elect = owner AND expires_at > now() AND expires_at < 'infinity'
