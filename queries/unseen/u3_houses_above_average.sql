-- Unseen query 3: houses whose average load over the last 30 seconds is 20% above the average of
-- all loads in that window. A theta join (no equality) of a per-house aggregate with a global
-- one.
SELECT h.house_id, h.avg_load, g.avg_load AS overall
FROM (SELECT house_id, AVG(value) AS avg_load
      FROM readings [RANGE 30 SECONDS SLIDE 1 SECOND]
      WHERE property = 1
      GROUP BY house_id) AS h,
     (SELECT AVG(value) AS avg_load
      FROM readings [RANGE 30 SECONDS SLIDE 1 SECOND]
      WHERE property = 1) AS g
WHERE h.avg_load > 1.2 * g.avg_load
