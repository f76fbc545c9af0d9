-- Per-plug sliding average load over 5 minutes, sliding every second.
SELECT house_id, household_id, plug_id, AVG(value) AS avg_load
FROM readings [RANGE 5 MINUTES SLIDE 1 SECOND]
WHERE property = 1
GROUP BY house_id, household_id, plug_id
