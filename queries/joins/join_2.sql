-- join_2 (dissertation 6.4.1, the Q4 template): per smart plug, the average load over
-- windows of 1, 3 minutes, joined on the plug (2-way join).
SELECT w1.house_id, w1.household_id, w1.plug_id,
       w1.avg_load AS avg_1m, w3.avg_load AS avg_3m
FROM (SELECT house_id, household_id, plug_id, AVG(value) AS avg_load
      FROM readings [RANGE 1 MINUTE SLIDE 1 SECOND]
      WHERE property = 1
      GROUP BY house_id, household_id, plug_id) AS w1,
     (SELECT house_id, household_id, plug_id, AVG(value) AS avg_load
      FROM readings [RANGE 3 MINUTES SLIDE 1 SECOND]
      WHERE property = 1
      GROUP BY house_id, household_id, plug_id) AS w3
WHERE w1.house_id = w3.house_id AND w1.household_id = w3.household_id AND w1.plug_id = w3.plug_id
