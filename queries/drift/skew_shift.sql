-- skew_shift: pairs of h and p tuples per key over 5 s windows, with p filtered on v < 10.
-- h's keys turn from uniform to Zipf 1.5 at 60 s (key 0 hot) and the hot key moves to 10 at 90 s.
SELECT ISTREAM h.k, COUNT(*) AS pairs
FROM h [RANGE 5 SECONDS] AS h, p [RANGE 5 SECONDS] AS p
WHERE h.k = p.k AND p.v < 10
GROUP BY h.k
