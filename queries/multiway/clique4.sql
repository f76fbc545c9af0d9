-- JIT's clique (Yang & Papadias, section VI) over 4 streams: every pair of streams equal on
-- its own column, 5-minute windows sliding by 10 s; per slide, the join's size.
SELECT COUNT(*) AS n
FROM c1 [RANGE 5 MINUTES SLIDE 10 SECONDS] AS c1,
     c2 [RANGE 5 MINUTES SLIDE 10 SECONDS] AS c2,
     c3 [RANGE 5 MINUTES SLIDE 10 SECONDS] AS c3,
     c4 [RANGE 5 MINUTES SLIDE 10 SECONDS] AS c4
WHERE c1.x2 = c2.x1 AND c1.x3 = c3.x1 AND c1.x4 = c4.x1
  AND c2.x3 = c3.x2 AND c2.x4 = c4.x2 AND c3.x4 = c4.x3
