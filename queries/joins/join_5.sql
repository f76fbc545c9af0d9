-- join_5 (dissertation 6.4.1, the Q4 template): per smart plug, the average load over
-- windows of 1, 3, 5, 7, 9 minutes, joined on the plug (5-way join).
SELECT w1.house_id, w1.household_id, w1.plug_id,
       w1.avg_load AS avg_1m, w3.avg_load AS avg_3m, w5.avg_load AS avg_5m, w7.avg_load AS avg_7m, w9.avg_load AS avg_9m
FROM (SELECT house_id, household_id, plug_id, AVG(value) AS avg_load
      FROM readings [RANGE 1 MINUTE SLIDE 1 SECOND]
      WHERE property = 1
      GROUP BY house_id, household_id, plug_id) AS w1,
     (SELECT house_id, household_id, plug_id, AVG(value) AS avg_load
      FROM readings [RANGE 3 MINUTES SLIDE 1 SECOND]
      WHERE property = 1
      GROUP BY house_id, household_id, plug_id) AS w3,
     (SELECT house_id, household_id, plug_id, AVG(value) AS avg_load
      FROM readings [RANGE 5 MINUTES SLIDE 1 SECOND]
      WHERE property = 1
      GROUP BY house_id, household_id, plug_id) AS w5,
     (SELECT house_id, household_id, plug_id, AVG(value) AS avg_load
      FROM readings [RANGE 7 MINUTES SLIDE 1 SECOND]
      WHERE property = 1
      GROUP BY house_id, household_id, plug_id) AS w7,
     (SELECT house_id, household_id, plug_id, AVG(value) AS avg_load
      FROM readings [RANGE 9 MINUTES SLIDE 1 SECOND]
      WHERE property = 1
      GROUP BY house_id, household_id, plug_id) AS w9
WHERE w1.house_id = w3.house_id AND w1.household_id = w3.household_id AND w1.plug_id = w3.plug_id
  AND w1.house_id = w5.house_id AND w1.household_id = w5.household_id AND w1.plug_id = w5.plug_id
  AND w1.house_id = w7.house_id AND w1.household_id = w7.household_id AND w1.plug_id = w7.plug_id
  AND w1.house_id = w9.house_id AND w1.household_id = w9.household_id AND w1.plug_id = w9.plug_id
