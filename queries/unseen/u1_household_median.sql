-- Unseen query 1 (issue 20: the model was not tuned on it): each household's MEDIAN load over
-- the last 2 minutes, every 10 seconds. A non-incremental holistic aggregate, a coarser group
-- key than the plug, and a slide other than one second.
SELECT house_id, household_id, MEDIAN(value) AS median_load
FROM readings [RANGE 2 MINUTES SLIDE 10 SECONDS]
WHERE property = 1
GROUP BY house_id, household_id
