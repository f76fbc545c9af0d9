-- Households that stop reporting: DSTREAM over per-household counts, a tumbling window.
SELECT DSTREAM house_id, household_id, COUNT(*) AS n
FROM readings [RANGE 10 SECONDS SLIDE 10 SECONDS]
GROUP BY house_id, household_id
