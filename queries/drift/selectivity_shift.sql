-- selectivity_shift: per key, the tuples of p's last 10 s passing v < 10. The predicate passes
-- 10% of p before 60 s and 90% after, while p's rate steps from 20 to 200 tuples/s.
SELECT ISTREAM k, COUNT(*) AS n, MAX(v) AS top
FROM p [RANGE 10 SECONDS]
WHERE v < 10
GROUP BY k
