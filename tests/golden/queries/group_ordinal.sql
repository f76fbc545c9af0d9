-- GROUP BY ordinal and alias, global expressions over aggregates, ABS/COALESCE.
SELECT house_id AS h, ABS(MIN(value) - MAX(value)) AS spread, COALESCE(AVG(value), 0) AS a
FROM readings [RANGE 30 SECONDS]
GROUP BY 1
