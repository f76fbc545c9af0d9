-- Q2 (dissertation 6.4): for each smart plug, count the load measurements of the last
-- 5 minutes whose value is higher than the plug's average load in the last 5 minutes.
-- Same shape as Q1 but with the incremental AVG instead of the non-incremental MAX.
SELECT r.house_id, r.household_id, r.plug_id, COUNT(*) AS above_avg
FROM readings [RANGE 5 MINUTES SLIDE 1 SECOND] AS r,
     (SELECT house_id, household_id, plug_id, AVG(value) AS avg_load
      FROM readings [RANGE 5 MINUTES SLIDE 1 SECOND]
      WHERE property = 1
      GROUP BY house_id, household_id, plug_id) AS a
WHERE r.property = 1
  AND r.house_id = a.house_id AND r.household_id = a.household_id AND r.plug_id = a.plug_id
  AND r.value > a.avg_load
GROUP BY r.house_id, r.household_id, r.plug_id
