-- RSTREAM of a NOW join: every r tuple of the current second with the s tuples of its key
-- in the last 5 s.
SELECT RSTREAM r.k, r.v, s.v AS s_v
FROM r [NOW] AS r, s [RANGE 5 SECONDS] AS s
WHERE r.k = s.k
