-- Unseen query 2: per house, how many work readings arrived in the last 10 minutes and the
-- spread of their cumulative energy, every 5 seconds. A long window over the work sensor (the
-- other half of the stream), grouped by house only.
SELECT house_id, COUNT(*) AS readings, MAX(value) - MIN(value) AS work_spread
FROM readings [RANGE 10 MINUTES SLIDE 5 SECONDS]
WHERE property = 0
GROUP BY house_id
