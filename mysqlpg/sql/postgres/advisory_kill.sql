-- Force release in advisory mode: end the holding session, which frees
-- every advisory lock it held. One row back: whether it was signalled.
SELECT pg_terminate_backend($1)
