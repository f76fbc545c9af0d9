-- Three-way window join on the key: per key, the triples of the last 20 s.
SELECT r.k, COUNT(*) AS n, SUM(r.v + s.v + t.v) AS total
FROM r [RANGE 20 SECONDS SLIDE 1 SECOND] AS r,
     s [RANGE 20 SECONDS SLIDE 1 SECOND] AS s,
     t [RANGE 20 SECONDS SLIDE 1 SECOND] AS t
WHERE r.k = s.k AND s.k = t.k
GROUP BY r.k
