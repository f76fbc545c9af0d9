-- Unseen query 5: a row whenever a house's count of loads above 100 W over the last minute
-- changes (ISTREAM), with a filter on a computed value before the aggregate.
SELECT ISTREAM house_id, COUNT(*) AS high
FROM readings [RANGE 1 MINUTE SLIDE 1 SECOND]
WHERE property = 1 AND value * 1.0 > 100
GROUP BY house_id
