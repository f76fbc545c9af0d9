-- join_8 (dissertation 6.4.1, the Q4 template): per smart plug, the average load over
-- windows of 1, 3, 5, 7, 9, 11, 13, 15 minutes, joined on the plug (8-way join).
SELECT w1.house_id, w1.household_id, w1.plug_id,
       w1.avg_load AS avg_1m, w3.avg_load AS avg_3m, w5.avg_load AS avg_5m, w7.avg_load AS avg_7m, w9.avg_load AS avg_9m, w11.avg_load AS avg_11m, w13.avg_load AS avg_13m, w15.avg_load AS avg_15m
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
      GROUP BY house_id, household_id, plug_id) AS w9,
     (SELECT house_id, household_id, plug_id, AVG(value) AS avg_load
      FROM readings [RANGE 11 MINUTES SLIDE 1 SECOND]
      WHERE property = 1
      GROUP BY house_id, household_id, plug_id) AS w11,
     (SELECT house_id, household_id, plug_id, AVG(value) AS avg_load
      FROM readings [RANGE 13 MINUTES SLIDE 1 SECOND]
      WHERE property = 1
      GROUP BY house_id, household_id, plug_id) AS w13,
     (SELECT house_id, household_id, plug_id, AVG(value) AS avg_load
      FROM readings [RANGE 15 MINUTES SLIDE 1 SECOND]
      WHERE property = 1
      GROUP BY house_id, household_id, plug_id) AS w15
WHERE w1.house_id = w3.house_id AND w1.household_id = w3.household_id AND w1.plug_id = w3.plug_id
  AND w1.house_id = w5.house_id AND w1.household_id = w5.household_id AND w1.plug_id = w5.plug_id
  AND w1.house_id = w7.house_id AND w1.household_id = w7.household_id AND w1.plug_id = w7.plug_id
  AND w1.house_id = w9.house_id AND w1.household_id = w9.household_id AND w1.plug_id = w9.plug_id
  AND w1.house_id = w11.house_id AND w1.household_id = w11.household_id AND w1.plug_id = w11.plug_id
  AND w1.house_id = w13.house_id AND w1.household_id = w13.household_id AND w1.plug_id = w13.plug_id
  AND w1.house_id = w15.house_id AND w1.household_id = w15.household_id AND w1.plug_id = w15.plug_id
