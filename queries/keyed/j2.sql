-- Two-way window join on the key: per key, the pairs of r and s tuples of the last 10 s.
SELECT r.k, COUNT(*) AS pairs, MAX(r.v - s.v) AS spread
FROM r [RANGE 10 SECONDS SLIDE 1 SECOND] AS r,
     s [RANGE 10 SECONDS SLIDE 1 SECOND] AS s
WHERE r.k = s.k
GROUP BY r.k
