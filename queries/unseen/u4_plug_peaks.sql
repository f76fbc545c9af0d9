-- Unseen query 4: plugs whose peak load of the last 20 seconds is more than twice their average
-- load of the last 4 minutes (a short MAX joined with a long AVG on the plug, then filtered on
-- the joined values).
SELECT s.house_id, s.household_id, s.plug_id, s.peak, l.avg_load
FROM (SELECT house_id, household_id, plug_id, MAX(value) AS peak
      FROM readings [RANGE 20 SECONDS SLIDE 1 SECOND]
      WHERE property = 1
      GROUP BY house_id, household_id, plug_id) AS s,
     (SELECT house_id, household_id, plug_id, AVG(value) AS avg_load
      FROM readings [RANGE 4 MINUTES SLIDE 1 SECOND]
      WHERE property = 1
      GROUP BY house_id, household_id, plug_id) AS l
WHERE s.house_id = l.house_id AND s.household_id = l.household_id AND s.plug_id = l.plug_id
  AND s.peak > 2 * l.avg_load
