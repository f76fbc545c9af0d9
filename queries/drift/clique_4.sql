-- clique_4: raw-window clique join of 4 streams on the key (HybMig section 5): every
-- pair joins on k. Rare keys are in stream a before 60 s and in z after, so the best
-- left-deep order starts with a, then with z. ISTREAM: each new 4-tuple once.
SELECT ISTREAM a.k,
       a.v AS a_v,
       b.v AS b_v,
       c.v AS c_v,
       z.v AS z_v
FROM a [RANGE 10 SECONDS] AS a,
     b [RANGE 10 SECONDS] AS b,
     c [RANGE 10 SECONDS] AS c,
     z [RANGE 10 SECONDS] AS z
WHERE a.k = b.k
  AND a.k = c.k
  AND a.k = z.k
  AND b.k = c.k
  AND b.k = z.k
  AND c.k = z.k
