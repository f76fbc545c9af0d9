-- x4 at Python scale: the star join counted per hub value a1 every second (RSTREAM).
SELECT h.a1, COUNT(*) AS n
FROM t1 [RANGE 3 SECONDS SLIDE 1 SECOND] AS h,
     t2 [RANGE 3 SECONDS SLIDE 1 SECOND] AS b,
     t3 [RANGE 3 SECONDS SLIDE 1 SECOND] AS c,
     t4 [RANGE 3 SECONDS SLIDE 1 SECOND] AS d
WHERE h.a1 = b.a1 AND h.a2 = c.a2 AND h.a3 = d.a3
GROUP BY h.a1
