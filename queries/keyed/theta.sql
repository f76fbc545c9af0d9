-- Theta (band) join, no equality: r and s tuples of the last 5 s whose keys differ by at most
-- one, with r's value below s's.
SELECT COUNT(*) AS pairs, MIN(s.v - r.v) AS closest
FROM r [RANGE 5 SECONDS SLIDE 1 SECOND] AS r,
     s [RANGE 5 SECONDS SLIDE 1 SECOND] AS s
WHERE r.k <= s.k + 1 AND s.k <= r.k + 1 AND r.v < s.v
