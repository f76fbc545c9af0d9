-- x4 (Ji's dissertation, section 4.3): a star join, t1 (the dissertation's S1) joined with
-- t2, t3, t4 on a1, a2, a3; 3 s windows; every result once, when it appears (ISTREAM).
-- Data: hycq data generate --generator x4 --out queries/qddh/x4 (README.md here).
SELECT ISTREAM h.ts AS ts1, b.ts AS ts2, c.ts AS ts3, d.ts AS ts4
FROM t1 [RANGE 3 SECONDS SLIDE 10 MILLISECONDS] AS h,
     t2 [RANGE 3 SECONDS SLIDE 10 MILLISECONDS] AS b,
     t3 [RANGE 3 SECONDS SLIDE 10 MILLISECONDS] AS c,
     t4 [RANGE 3 SECONDS SLIDE 10 MILLISECONDS] AS d
WHERE h.a1 = b.a1 AND h.a2 = c.a2 AND h.a3 = d.a3
