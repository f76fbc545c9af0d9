-- New high-load readings as a stream: selection and projection only, ISTREAM.
SELECT ISTREAM id, plug_id, value * 2 AS doubled
FROM readings [NOW]
WHERE property = 1 AND value > 100.0
