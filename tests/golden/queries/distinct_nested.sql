-- SELECT DISTINCT over a derived table, with BETWEEN, IN and functions.
SELECT DISTINCT h.house_id, ROUND(h.total, 1) AS total
FROM (SELECT house_id, SUM(value) AS total
      FROM readings [RANGE 1 MINUTE SLIDE 5 SECONDS]
      WHERE property IN (0, 1) AND value BETWEEN 0 AND 10000
      GROUP BY house_id) AS h
WHERE h.total > 0
