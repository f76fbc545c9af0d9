-- x3 at Python scale: the same join, counted per join value every second (RSTREAM): the
-- coverage and relative error of each count show what disorder costs the join.
SELECT a.a1, COUNT(*) AS n
FROM s1 [RANGE 5 SECONDS SLIDE 1 SECOND] AS a,
     s2 [RANGE 5 SECONDS SLIDE 1 SECOND] AS b,
     s3 [RANGE 5 SECONDS SLIDE 1 SECOND] AS c
WHERE a.a1 = b.a1 AND b.a1 = c.a1
GROUP BY a.a1
