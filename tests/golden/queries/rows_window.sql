-- Count-based window: median of the last 1000 loads, every 100 tuples.
SELECT MEDIAN(value) AS med, COUNT(DISTINCT plug_id) AS plugs
FROM readings [ROWS 1000 SLIDE 100]
WHERE property = 1
