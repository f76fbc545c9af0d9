-- ISTREAM of a join aggregate: a row whenever a key's number of r-s pairs over 10 s changes.
SELECT ISTREAM r.k, COUNT(*) AS pairs
FROM r [RANGE 10 SECONDS SLIDE 1 SECOND] AS r,
     s [RANGE 10 SECONDS SLIDE 1 SECOND] AS s
WHERE r.k = s.k
GROUP BY r.k
