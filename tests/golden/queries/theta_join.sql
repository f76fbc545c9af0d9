-- Theta join of two windows with an ON clause, a CASE and a HAVING.
SELECT a.plug_id, COUNT(*) AS n,
       CASE WHEN MAX(b.value) > 100 THEN 'high' ELSE 'low' END AS level
FROM readings [RANGE 10 SECONDS] AS a
JOIN readings [UNBOUNDED] AS b ON a.house_id = b.house_id AND a.value < b.value
WHERE a.property = 1 AND b.property = 1
GROUP BY a.plug_id
HAVING COUNT(*) > 2
