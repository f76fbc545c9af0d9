-- Q4 (dissertation 6.4): like Q3 but compares only the average loads of the last 5 minutes
-- and the last minute per smart plug (incremental AVG only, no MAX).
SELECT l.house_id, l.household_id, l.plug_id,
       l.avg_load AS avg_5m, s.avg_load AS avg_1m,
       s.avg_load - l.avg_load AS avg_trend
FROM (SELECT house_id, household_id, plug_id, AVG(value) AS avg_load
      FROM readings [RANGE 5 MINUTES SLIDE 1 SECOND]
      WHERE property = 1
      GROUP BY house_id, household_id, plug_id) AS l,
     (SELECT house_id, household_id, plug_id, AVG(value) AS avg_load
      FROM readings [RANGE 1 MINUTE SLIDE 1 SECOND]
      WHERE property = 1
      GROUP BY house_id, household_id, plug_id) AS s
WHERE l.house_id = s.house_id AND l.household_id = s.household_id AND l.plug_id = s.plug_id
