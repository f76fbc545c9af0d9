"""A correlated count recounted in Arrow at every slide, without a join (issue 20).

The third path of ``engines.mig.correlated_counts`` (the shape:
``optimizer.ir.correlated.ScanCount``). When a per-plug AVG moves for about half the plugs
at every slide, keeping the counts per key gains nothing, and the plain statement joins the
whole window (millions of rows) with every key's aggregate through a hash table of
three-column keys. Here the key of every row is turned into a dense integer id once, when
its chunk enters the window, so a slide

1. maps the state's keys to ids and scatters its columns into arrays indexed by id;
2. gathers each window row's right-hand values from those arrays (``take`` by id);
3. evaluates the join's residual as Arrow does, and counts the matches per id
   (``numpy.bincount``);
4. returns the state's keys whose COUNT(*) is positive, with their counts.

Ids: the integer key columns are packed into one int64 (``63 // keys`` bits each) and
looked up in a sorted array of the packed keys seen so far; new keys get the next ids. A
key out of the packing's range, a non-finite DOUBLE among the compared columns, or a state
column that cannot be cast, ends this path for the rest of the run (``off`` says why): the
MIG goes on with the SQL paths, which give the same rows.

Chunks are identified by the MIG's chunk ids and the table object they hold (the front
chunk of a FIFO input is replaced by a slice when rows expire; it is encoded again).
Every ``BLOCK`` consecutive encoded chunks are merged into one block (once), and a block
whose first chunks left the window is sliced: a slide reads some 30 arrays instead of
the window's 300 chunks (Acero's and ``take``'s work per batch was half of a slide over
1.5 M rows).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.acero as acero
import pyarrow.compute as pc

from engines.arrow_types import arrow_type
from optimizer.ir.correlated import ScanCount
from optimizer.ir.types import DataType


class ScanUnavailable(Exception):
    """This data breaks a promise the scan relies on (a key out of range, a NaN)."""


#: Consecutive encoded chunks merged into one block.
BLOCK = 16


@dataclass
class _Encoded:
    """Rows of the window after the left chain's selects: their key ids and the window
    columns the predicate and counts read; of one chunk (``source``) or a block (None)."""

    source: pa.Table | None
    ids: np.ndarray
    columns: dict[int, pa.Array]


@dataclass
class _Block:
    """Consecutive chunks ``cids`` (encoded from ``sources``) merged into ``rows``; chunk
    ``k``'s rows start at ``starts[k]``."""

    cids: list[int]
    sources: list[pa.Table]
    starts: list[int]
    rows: _Encoded

    @classmethod
    def merge(cls, run: list[tuple[int, pa.Table, _Encoded]]) -> _Block:
        starts = np.cumsum([0, *(len(e.ids) for _, _, e in run[:-1])]).tolist()
        first = run[0][2]
        columns = {c: pa.concat_arrays([e.columns[c] for _, _, e in run]) for c in first.columns}
        rows = _Encoded(None, np.concatenate([e.ids for _, _, e in run]), columns)
        return cls([c for c, _, _ in run], [t for _, t, _ in run], starts, rows)

    def covers(self, live: list[tuple[int, pa.Table]], i: int) -> int:
        """How many of ``live`` from ``i`` on are this block's chunks from ``live[i]`` to
        its last, unchanged (0: not all of them)."""
        p = self.cids.index(live[i][0])
        n = len(self.cids) - p
        if i + n > len(live):
            return 0
        for q in range(n):
            cid, table = live[i + q]
            if cid != self.cids[p + q] or table is not self.sources[p + q]:
                return 0
        return n

    def since(self, cid: int) -> _Encoded:
        """The rows of chunk ``cid`` and the block's later chunks (a zero-copy slice)."""
        start = self.starts[self.cids.index(cid)]
        if start == 0:
            return self.rows
        rows = self.rows
        return _Encoded(
            None, rows.ids[start:], {c: a.slice(start) for c, a in rows.columns.items()}
        )


class KeyIds:
    """Dense ids of packed integer keys: 0 for a NULL key, 1.. in order of first sight."""

    def __init__(self) -> None:
        self.known = np.empty(0, np.int64)  # sorted packed keys
        self.ids = np.empty(0, np.int32)  # their ids, parallel to ``known``
        self.next = 1

    def __len__(self) -> int:
        return self.next

    def lookup(self, packed: np.ndarray, add: bool) -> np.ndarray:
        """The ids of ``packed`` keys; unknown keys get new ids when ``add``, else 0."""
        ids = self._find(packed)
        missing = ids < 0
        if missing.any():
            if not add:
                ids[missing] = 0
                return ids
            new = np.unique(packed[missing])
            known = np.concatenate([self.known, new])
            order = np.argsort(known, kind="stable")
            fresh = np.arange(self.next, self.next + len(new), dtype=np.int32)
            self.known, self.ids = known[order], np.concatenate([self.ids, fresh])[order]
            self.next += len(new)
            ids = self._find(packed)
        return ids

    def _find(self, packed: np.ndarray) -> np.ndarray:
        if not len(self.known):
            return np.full(len(packed), -1, np.int32)
        pos = np.minimum(np.searchsorted(self.known, packed), len(self.known) - 1)
        return np.where(self.known[pos] == packed, self.ids[pos], -1).astype(np.int32)


def pack(columns: list[pa.Array | pa.ChunkedArray]) -> tuple[np.ndarray, np.ndarray]:
    """(packed int64 keys, valid: no key column NULL) of integer key columns; raises
    ScanUnavailable for a value outside the ``63 // len(columns)`` bits each one gets."""
    rows = len(columns[0])
    bits = 63 // len(columns)
    half = 1 << (bits - 1)
    packed = np.zeros(rows, np.int64)
    valid = np.ones(rows, bool)
    for i, col in enumerate(columns):
        if not pa.types.is_signed_integer(col.type):
            raise ScanUnavailable(f"a key column of type {col.type}")
        if col.null_count:
            valid &= np.asarray(pc.is_valid(col))
            col = pc.fill_null(col, 0)
        v = np.asarray(col).astype(np.int64, copy=False)
        if rows and (v.min() < -half or v.max() >= half):
            raise ScanUnavailable(f"a key value outside +-2^{bits - 1}")
        packed |= (v + half) << (bits * i)
    return packed, valid


def _finite(col: pa.Array | pa.ChunkedArray) -> bool:
    return bool(pc.all(pc.is_finite(col)).as_py() is not False)


class ScanCounter:
    """One MIG's correlated count by scan (module docstring)."""

    def __init__(self, spec: ScanCount) -> None:
        self.spec = spec
        self.keys = KeyIds()
        self.chunks: dict[int, _Encoded] = {}
        """Encoded chunks not merged into a block yet."""
        self.blocks: dict[int, _Block] = {}
        """The block of each chunk id merged into one."""
        self.rows = 0
        """Rows of the window past the left chain's selects at the last slide."""
        self.off: str | None = None
        """Why this path ended (None: usable)."""
        self.encoded = 0
        """Chunks the last slide encoded (those that entered, or the whole window when the
        path has not run for a while)."""
        self._window_cols = sorted({c for side, c in spec.columns if side == "window"})
        self._window_doubles = [c for side, c in spec.doubles if side == "window"]
        self._inner_doubles = {c for side, c in spec.doubles if side == "inner"}

    # -- the window's chunks, encoded once -------------------------------------------------

    def _encode(self, table: pa.Table) -> _Encoded:
        spec = self.spec
        for c in self._window_doubles:
            if not _finite(table.column(c)):
                raise ScanUnavailable(f"a non-finite value in window column {c}")
        rows = table if spec.filter is None else table.filter(spec.filter)
        packed, valid = pack([rows.column(c) for c in spec.left_keys])
        ids = self.keys.lookup(packed, add=True)
        ids[~valid] = 0
        cols = {c: rows.column(c).combine_chunks() for c in self._window_cols}
        return _Encoded(table, ids, cols)

    def _encoded(self, chunks: Iterable[tuple[int, pa.Table]]) -> list[_Encoded]:
        """The window's rows encoded, as blocks (sliced where their first chunks left) and
        chunks; the chunks not encoded yet are encoded, and every ``BLOCK`` consecutive
        ones outside a block merged into one. Order does not matter to the count."""
        live = list(chunks)
        self.encoded = 0
        out: list[_Encoded] = []
        singles: dict[int, _Encoded] = {}
        blocks: dict[int, _Block] = {}
        run: list[tuple[int, pa.Table, _Encoded]] = []

        def seal() -> None:
            # full blocks from the run; the rest stays as chunks
            full = len(run) - len(run) % BLOCK
            for k in range(0, full, BLOCK):
                block = _Block.merge(run[k : k + BLOCK])
                blocks.update(dict.fromkeys(block.cids, block))
                out.append(block.rows)
            for cid, _, enc in run[full:]:
                singles[cid] = enc
                out.append(enc)
            run.clear()

        i = 0
        while i < len(live):
            cid, table = live[i]
            block = self.blocks.get(cid)
            n = block.covers(live, i) if block is not None else 0
            if block is not None and n:
                seal()
                out.append(block.since(cid))
                blocks.update(dict.fromkeys(block.cids, block))
                i += n
                continue
            enc = self.chunks.get(cid)
            if enc is None or enc.source is not table:
                enc = self._encode(table)
                self.encoded += 1
            run.append((cid, table, enc))
            i += 1
        seal()
        self.chunks, self.blocks = singles, blocks
        self.rows = sum(len(e.ids) for e in out)
        return out

    @contextlib.contextmanager
    def _giving_up(self) -> Iterator[None]:
        """ScanUnavailable inside ends the path: ``off`` says why, the ids are dropped."""
        try:
            yield
        except ScanUnavailable as why:
            self.off = str(why)
            self.reset()
            raise

    def follow(self, chunks: Iterable[tuple[int, pa.Table]]) -> None:
        """Encode the chunks not encoded yet (forgetting those gone), as a slide would.
        Raises ScanUnavailable (and sets ``off``) as :meth:`count` does."""
        with self._giving_up():
            self._encoded(chunks)

    def reset(self) -> None:
        """Forget the ids and encodings (they are rebuilt from the next slide's window)."""
        self.keys = KeyIds()
        self.chunks = {}
        self.blocks = {}

    # -- a slide ---------------------------------------------------------------------------

    def count(
        self, state: pa.Table, chunks: Iterable[tuple[int, pa.Table]], schema: pa.Schema
    ) -> pa.Table:
        """The group's result over the window ``chunks`` given the inner aggregate's
        ``state``, typed as ``schema`` (the plain statement's result). Raises
        ScanUnavailable (and sets ``off``) when the data breaks the path's promises."""
        with self._giving_up():
            return self._count(state, list(chunks), schema)

    def _count(
        self, state: pa.Table, chunks: list[tuple[int, pa.Table]], schema: pa.Schema
    ) -> pa.Table:
        spec = self.spec
        if len(self.keys) > 2 * (state.num_rows + sum(t.num_rows for _, t in chunks)) + 4096:
            self.reset()  # keys that left long ago: ids are dense again
        encoded = self._encoded(chunks)
        if not chunks or not state.num_rows:  # no left row, or no key to match
            return schema.empty_table()
        types = chunks[0][1].schema.types
        n = len(spec.left_keys)
        packed, valid = pack([state.column(f"k{j}") for j in range(n)])
        sid = self.keys.lookup(packed, add=False)
        sid[~valid] = 0
        size = len(self.keys)
        row_of = np.full(size, -1, np.int64)
        row_of[sid[sid > 0]] = np.flatnonzero(sid > 0)
        gather = pa.array(np.maximum(row_of, 0))
        ids = pa.chunked_array([pa.array(e.ids) for e in encoded], pa.int32())
        columns: list[pa.ChunkedArray] = []
        for side, c in spec.columns:
            if side == "window":
                columns.append(pa.chunked_array([e.columns[c] for e in encoded], types[c]))
            else:
                dense = self._inner_column(state, c).take(gather)
                columns.append(pc.take(dense, ids))
        counts = [np.bincount(m, minlength=size) for m in self._evaluate(columns, ids)]
        star = counts[next(i for i, a in enumerate(spec.counts) if a is None)]
        keep = np.flatnonzero((sid > 0) & (star[sid] > 0))
        arrays: list[pa.Array] = []
        for p, j in enumerate(spec.key_positions):
            arrays.append(pc.cast(state.column(f"k{j}").take(keep), schema.field(p).type))
        width = len(spec.key_positions)
        for i, per_id in enumerate(counts):
            arrays.append(pa.array(per_id[sid[keep]], schema.field(width + i).type))
        return pa.Table.from_arrays(
            [a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in arrays],
            schema=schema,
        )

    def _inner_column(self, state: pa.Table, c: int) -> pa.Array:
        """The inner aggregate's output column ``c`` from its state, typed as the
        aggregate's output."""
        spec = self.spec
        n = len(spec.left_keys)
        name = f"k{c}" if c < n else f"v{c - n}"
        if name not in state.column_names:
            raise ScanUnavailable(f"the state has no column {name}")
        col = state.column(name).combine_chunks()
        dtype = spec.inner_types[c]
        if dtype is not DataType.NULL:
            try:
                col = pc.cast(col, arrow_type(dtype))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
                raise ScanUnavailable(f"state column {name}: {err}") from err
        if c in self._inner_doubles and not _finite(col):
            raise ScanUnavailable(f"a non-finite value in the inner aggregate's column {c}")
        return col

    def _evaluate(self, columns: list[pa.ChunkedArray], ids: pa.ChunkedArray) -> list[np.ndarray]:
        """Per count, the ids of the rows it counts: rows where the residual is TRUE and,
        for COUNT(x), x is not NULL (one Acero filter, then a projection per count)."""
        spec = self.spec
        names = [f"c{i}" for i in range(len(columns))]
        table = pa.table([*columns, ids], names=[*names, "id"])
        nodes = [acero.Declaration("table_source", acero.TableSourceNodeOptions(table))]
        if spec.predicate is not None:
            nodes.append(acero.Declaration("filter", acero.FilterNodeOptions(spec.predicate)))
        exprs = [pc.field("id")]
        exprs += [pc.field(names[a]).is_valid() for a in spec.counts if a is not None]
        nodes.append(acero.Declaration("project", acero.ProjectNodeOptions(exprs)))
        out = acero.Declaration.from_sequence(nodes).to_table(use_threads=False)
        matched = _numpy(out.column(0))
        valid = iter(out.columns[1:])
        return [matched if a is None else matched[_numpy(next(valid))] for a in spec.counts]


def _numpy(col: pa.ChunkedArray) -> np.ndarray:
    if col.num_chunks == 1:
        return np.asarray(col.chunk(0))
    return np.asarray(col.combine_chunks())
