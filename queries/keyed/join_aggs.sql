-- Join of aggregates of two streams over different windows: per key seen at least twice in
-- r's last 30 s, its count and average there next to its maximum in s's last 10 s.
SELECT a.k, a.n, a.avg_v, b.max_v
FROM (SELECT k, COUNT(*) AS n, AVG(v) AS avg_v
      FROM r [RANGE 30 SECONDS SLIDE 1 SECOND] GROUP BY k) AS a,
     (SELECT k, MAX(v) AS max_v
      FROM s [RANGE 10 SECONDS SLIDE 1 SECOND] GROUP BY k) AS b
WHERE a.k = b.k AND a.n > 1
