-- clique_8: raw-window clique join of 8 streams on the key (HybMig section 5): every
-- pair joins on k. Rare keys are in stream a before 60 s and in z after, so the best
-- left-deep order starts with a, then with z. ISTREAM: each new 8-tuple once.
SELECT ISTREAM a.k,
       a.v AS a_v,
       b.v AS b_v,
       c.v AS c_v,
       d.v AS d_v,
       e.v AS e_v,
       f.v AS f_v,
       g.v AS g_v,
       z.v AS z_v
FROM a [RANGE 10 SECONDS] AS a,
     b [RANGE 10 SECONDS] AS b,
     c [RANGE 10 SECONDS] AS c,
     d [RANGE 10 SECONDS] AS d,
     e [RANGE 10 SECONDS] AS e,
     f [RANGE 10 SECONDS] AS f,
     g [RANGE 10 SECONDS] AS g,
     z [RANGE 10 SECONDS] AS z
WHERE a.k = b.k
  AND a.k = c.k
  AND a.k = d.k
  AND a.k = e.k
  AND a.k = f.k
  AND a.k = g.k
  AND a.k = z.k
  AND b.k = c.k
  AND b.k = d.k
  AND b.k = e.k
  AND b.k = f.k
  AND b.k = g.k
  AND b.k = z.k
  AND c.k = d.k
  AND c.k = e.k
  AND c.k = f.k
  AND c.k = g.k
  AND c.k = z.k
  AND d.k = e.k
  AND d.k = f.k
  AND d.k = g.k
  AND d.k = z.k
  AND e.k = f.k
  AND e.k = g.k
  AND e.k = z.k
  AND f.k = g.k
  AND f.k = z.k
  AND g.k = z.k
