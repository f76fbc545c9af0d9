-- Streams in different time units (r in seconds, m in milliseconds): the query runs in
-- milliseconds, the finest unit; _ts and r.ts are epoch milliseconds.
SELECT r.k, COUNT(*) AS pairs
FROM r [RANGE 5 SECONDS SLIDE 1 SECOND] AS r,
     m [RANGE 5 SECONDS SLIDE 1 SECOND] AS m
WHERE r.k = m.k
GROUP BY r.k
