-- Q5 (dissertation 6.4): for each household, the maximum total load reported by a single
-- smart plug within the last 5 minutes. An aggregate (MAX per household) over an aggregate
-- (SUM per plug).
SELECT p.house_id, p.household_id, MAX(p.total_load) AS max_plug_total
FROM (SELECT house_id, household_id, plug_id, SUM(value) AS total_load
      FROM readings [RANGE 5 MINUTES SLIDE 1 SECOND]
      WHERE property = 1
      GROUP BY house_id, household_id, plug_id) AS p
GROUP BY p.house_id, p.household_id
