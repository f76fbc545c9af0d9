-- A star: the hub h joined with each spoke on its own attribute over 5 s windows; per slide
-- and value of a1, the matches and the hub's average value among them.
SELECT h.a1, COUNT(*) AS n, AVG(h.v) AS hub_v
FROM h [RANGE 5 SECONDS SLIDE 1 SECOND] AS h,
     p1 [RANGE 5 SECONDS SLIDE 1 SECOND] AS p1,
     p2 [RANGE 5 SECONDS SLIDE 1 SECOND] AS p2,
     p3 [RANGE 5 SECONDS SLIDE 1 SECOND] AS p3
WHERE h.a1 = p1.a1 AND h.a2 = p2.a2 AND h.a3 = p3.a3
GROUP BY h.a1
