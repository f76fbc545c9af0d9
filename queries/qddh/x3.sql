-- x3 (Ji's dissertation, section 4.3): three streams, 5 s windows, an equi-join on a1.
-- Every join result once, when it appears (ISTREAM; the slide is the 10 ms arrival spacing).
-- Data: hycq data generate --generator x3 --out queries/qddh/x3 (README.md here).
SELECT ISTREAM a.ts AS ts1, b.ts AS ts2, c.ts AS ts3, a.a1
FROM s1 [RANGE 5 SECONDS SLIDE 10 MILLISECONDS] AS a,
     s2 [RANGE 5 SECONDS SLIDE 10 MILLISECONDS] AS b,
     s3 [RANGE 5 SECONDS SLIDE 10 MILLISECONDS] AS c
WHERE a.a1 = b.a1 AND b.a1 = c.a1
