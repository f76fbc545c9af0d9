"""A-Caching's cache candidates: which segments of which MJoin pipelines can be cached.

A *candidate* caches segment ``first..last`` (step indexes) of pipeline ``i``: the inputs ``S``
it joins, keyed by the segment columns that the prefix (the pipeline's inputs before the
segment) is equal to. It is valid only when

* every predicate between prefix and segment is a hashable equality (so an entry's key is a
  function of the segment tuple: the Update operators can find the entry of a segment change;
  theta predicates inside the prefix or the segment are fine), and
* the *prefix invariant* (Def. 3.2) holds: for every ``l`` in ``S``, pipeline ``l``'s first
  ``|S| - 1`` steps join exactly ``S - {l}``, so that after them pipeline ``l`` carries
  ``d(segment)``; an Update operator placed there inserts (or deletes) each such tuple into
  the cache entry of its key, if that entry exists.

Candidates of different pipelines with the same inputs and key are one *shared* cache
(Def. 4.1): one storage, one set of Updates, several Lookups.

The package docstring (``engines.row.joins.acaching``) lists the other parts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engines.row.joins.mjoin import (
    NarySpec,
    Pipeline,
)


@dataclass(frozen=True)
class Candidate:
    """A cacheable segment ``first..last`` (step indexes) of pipeline ``pipeline``."""

    pipeline: int
    first: int
    last: int
    inputs: frozenset[int]
    key_cols: tuple[int, ...]  # global segment columns of the key, one per equality, sorted
    prefix_cols: tuple[int, ...]  # flat columns of the partial before ``first``, aligned

    @property
    def group(self) -> tuple[frozenset[int], tuple[int, ...]]:
        """Sharing identity: candidates with equal groups are one cache (Def. 4.1)."""
        return self.inputs, self.key_cols

    def label(self) -> str:
        ins = ",".join(str(p) for p in sorted(self.inputs))
        return f"p{self.pipeline}[{self.first}..{self.last}]{{{ins}}}"


def candidates(spec: NarySpec, pipelines: Sequence[Pipeline]) -> list[Candidate]:
    """Every valid candidate (module docstring) for the current probe orders."""
    out = []
    starts = spec.starts
    for i, pipe in enumerate(pipelines):
        nsteps = len(pipe.steps)
        for first in range(nsteps):
            for last in range(first + 1, nsteps):
                prefix = set(pipe.order[: first + 1])
                seg = frozenset(pipe.order[first + 1 : last + 2])
                pairs: list[tuple[int, int]] = []  # (segment column, prefix column)
                ok = True
                for c in spec.conjuncts:
                    ins = spec.inputs_of(c)
                    if not (ins & prefix and ins & seg) or not ins <= prefix | seg:
                        continue  # inside one side, or applied after the segment
                    eq = spec.hashable(c)
                    if eq is None:
                        ok = False
                        break
                    a, b = eq
                    if spec.owner(a) in seg:
                        a, b = b, a
                    pairs.append((b, a))
                if not ok or not pairs:
                    continue
                if not all(frozenset(pipelines[p].order[1 : len(seg)]) == seg - {p} for p in seg):
                    continue
                pairs.sort()
                key = tuple(b for b, _ in pairs)
                prefix_flat = tuple(
                    pipe.flat_starts[spec.owner(a)] + a - starts[spec.owner(a)] for _, a in pairs
                )
                out.append(Candidate(i, first, last, seg, key, prefix_flat))
    return out


def compatible(chosen: Sequence[Candidate], spec: NarySpec, pipelines: Sequence[Pipeline]) -> bool:
    """No two chosen segments overlap in a pipeline, and no Update point of a chosen cache
    lies strictly inside a chosen segment of its pipeline."""
    by_pipe: dict[int, list[tuple[int, int]]] = {}
    for c in chosen:
        for a, b in by_pipe.get(c.pipeline, ()):
            if not (c.last < a or b < c.first):
                return False
        by_pipe.setdefault(c.pipeline, []).append((c.first, c.last))
    for c in chosen:
        t = len(c.inputs) - 2  # Update after this step index, in each pipeline of S
        for p in c.inputs:
            for a, b in by_pipe.get(p, ()):
                if a <= t < b:
                    return False
    return True
