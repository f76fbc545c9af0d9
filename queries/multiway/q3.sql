-- A-Caching's Q3 (Babu et al., section 7.2): r(a) join s(a, b) join t(b) over 10 s windows;
-- per slide, the join's size. Multiplicity 1 in r and s, 5 in t (catalog: t at 5x the rate).
SELECT COUNT(*) AS n, SUM(t.b) AS b_sum
FROM r [RANGE 10 SECONDS SLIDE 1 SECOND] AS r,
     s [RANGE 10 SECONDS SLIDE 1 SECOND] AS s,
     t [RANGE 10 SECONDS SLIDE 1 SECOND] AS t
WHERE r.a = s.a AND s.b = t.b
