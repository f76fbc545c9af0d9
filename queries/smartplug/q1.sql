-- Q1 (dissertation 6.4): for each smart plug, count the load measurements of the last
-- 5 minutes whose value is higher than 90% of the plug's maximum load in the last 5 minutes.
-- A correlated aggregate: the window is joined with its own per-plug MAX (non-incremental).
SELECT r.house_id, r.household_id, r.plug_id, COUNT(*) AS high_loads
FROM readings [RANGE 5 MINUTES SLIDE 1 SECOND] AS r,
     (SELECT house_id, household_id, plug_id, MAX(value) AS max_load
      FROM readings [RANGE 5 MINUTES SLIDE 1 SECOND]
      WHERE property = 1
      GROUP BY house_id, household_id, plug_id) AS m
WHERE r.property = 1
  AND r.house_id = m.house_id AND r.household_id = m.household_id AND r.plug_id = m.plug_id
  AND r.value > 0.9 * m.max_load
GROUP BY r.house_id, r.household_id, r.plug_id
