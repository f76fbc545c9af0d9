-- Q6 (dissertation 6.4): for each smart plug, compare the average loads of the last 1, 3
-- and 5 minutes. Three per-plug AVG aggregates over three windows, joined (3-way join).
SELECT a1.house_id, a1.household_id, a1.plug_id,
       a1.avg_load AS avg_1m, a3.avg_load AS avg_3m, a5.avg_load AS avg_5m
FROM (SELECT house_id, household_id, plug_id, AVG(value) AS avg_load
      FROM readings [RANGE 1 MINUTE SLIDE 1 SECOND]
      WHERE property = 1
      GROUP BY house_id, household_id, plug_id) AS a1,
     (SELECT house_id, household_id, plug_id, AVG(value) AS avg_load
      FROM readings [RANGE 3 MINUTES SLIDE 1 SECOND]
      WHERE property = 1
      GROUP BY house_id, household_id, plug_id) AS a3,
     (SELECT house_id, household_id, plug_id, AVG(value) AS avg_load
      FROM readings [RANGE 5 MINUTES SLIDE 1 SECOND]
      WHERE property = 1
      GROUP BY house_id, household_id, plug_id) AS a5
WHERE a1.house_id = a3.house_id AND a1.household_id = a3.household_id
  AND a1.plug_id = a3.plug_id
  AND a1.house_id = a5.house_id AND a1.household_id = a5.household_id
  AND a1.plug_id = a5.plug_id
