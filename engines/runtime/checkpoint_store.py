"""A checkpoint folder's files: the manifest format, its validation, loading one back.

``seg-N.json`` and ``seg-N-K.arrow`` hold the log since the previous checkpoint (events;
Arrow IPC per stream K); ``ckpt-N.json`` the manifest, written last (temporary file, fsync,
rename), with the size and SHA-256 of every file it needs and a checksum of its own. A
checkpoint whose manifest or files do not check out is refused and the previous one used.
The newest two manifests are kept; segments wholly before both horizons are dropped.

``engines.runtime.checkpoint`` describes checkpoints as a whole (docs/checkpoints.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from engines.runtime.checkpoint_fingerprint import _refuse
from optimizer.ir.errors import CheckpointError

#: 2: fingerprints with the inputs, digests of the delivered rows, the interval, instants
FORMAT = 2
OUTPUT_PARTIAL = "output.partial"
DEAD_LETTER_PARTIAL = "dead_letter.partial"
FINISHED = "finished.json"
_MANIFEST = re.compile(r"^ckpt-(\d{6,})\.json$")
_SEGMENT = re.compile(r"^seg-(\d{6,})(?:-\d+\.arrow|\.json)$")


@dataclass
class Loaded:
    """The checkpoint a run resumes from (a validated manifest)."""

    directory: Path
    manifest: dict[str, Any]
    path: Path
    #: newer checkpoints that were refused, with the reason
    refused: list[str] = field(default_factory=list)

    @property
    def number(self) -> int:
        return int(self.manifest["number"])

    @property
    def last_instant(self) -> int | None:
        value = self.manifest["last_instant"]
        return None if value is None else int(value)

    @property
    def every_s(self) -> float:
        """The interval the checkpointed run was started with."""
        return float(self.manifest["every_s"])

    def events(self) -> Iterator[tuple[str, str, Any]]:
        """The log to replay, cut to what can still matter: ``("i", stream, batch)``,
        ``("a", stream, ts)`` or ``("e", stream, None)``."""
        m = self.manifest
        keep_after: dict[str, int | None] = m["keep_after"]
        for stream, ts in sorted(m["prefix"]["progress"].items()):
            yield ("a", stream, int(ts))
        for stream in m["prefix"]["ended"]:
            yield ("e", stream, None)
        for seg in m["segments"]:
            meta = json.loads((self.directory / f"seg-{seg['number']:06d}.json").read_text())
            batches: dict[str, list[pa.RecordBatch]] = {}
            for stream, k in meta["files"].items():
                path = self.directory / f"seg-{seg['number']:06d}-{k}.arrow"
                with pa.memory_map(str(path)) as source:
                    reader = pa.ipc.open_file(source)
                    count = reader.num_record_batches
                    batches[stream] = [reader.get_batch(i) for i in range(count)]
            for kind, stream, value in meta["events"]:
                if kind != "i":
                    yield (kind, stream, value if kind == "a" else None)
                    continue
                batch = batches[stream][value]
                after = keep_after.get(stream)
                if after is not None and batch.num_rows:
                    t = batch.column(meta["time_columns"][stream])
                    top = pc.max(t).as_py()
                    batch = batch.filter(pc.greater(t, pa.scalar(after, t.type)))
                    if batch.num_rows == 0:
                        yield ("a", stream, int(top))
                        continue
                yield ("i", stream, batch)


def load(directory: Path, expected: dict[str, Any] | None = None) -> Loaded:
    """The newest intact checkpoint in ``directory`` (CheckpointError when there is none,
    when the run finished, or when it belongs to another query or run)."""
    if not directory.is_dir():
        raise CheckpointError(
            f"--resume: no checkpoint folder at {directory}",
            hint="pass the folder a run was started with --checkpoint",
        )
    if (directory / FINISHED).exists():
        raise CheckpointError(
            f"--resume: the run checkpointed in {directory} finished; nothing to resume",
            hint="start a new run with --checkpoint and an empty folder",
        )
    refused: list[str] = []
    for _n, path in sorted(_manifests(directory), reverse=True):
        problem, manifest = _check(directory, path)
        if problem is None:
            assert manifest is not None
            if expected is not None and manifest["fingerprint"] != expected:
                _refuse(directory, manifest["fingerprint"], expected)
            for reason in refused:
                warnings.warn(reason, RuntimeWarning, stacklevel=2)
            return Loaded(directory, manifest, path, refused)
        refused.append(f"checkpoint {path.name} refused: {problem}; using the one before")
    detail = f" ({'; '.join(refused)})" if refused else ""
    raise CheckpointError(
        f"--resume: no intact checkpoint in {directory}{detail}",
        hint="start the run again without --resume (and with an empty --checkpoint folder)",
    )


def stored_placement(directory: Path) -> dict[str, str] | None:
    """The placement the checkpointed run in ``directory`` ran (None: no intact checkpoint;
    the resume itself then says why)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return dict(load(directory).manifest["fingerprint"]["placement"])
        except CheckpointError:
            return None


def restore_partial(partial: Path, final: str | None, size: int | None, what: str) -> None:
    """Make ``partial`` hold the first ``size`` bytes the run committed to ``what``: cut
    back, or copied from ``final`` when an interrupted run moved it there."""
    if size is None:
        return
    if not partial.exists() and size == 0:
        partial.write_bytes(b"")
    if not partial.exists():
        source = Path(final) if final is not None else None
        if source is None or not source.is_file() or source.stat().st_size < size:
            raise CheckpointError(
                f"--resume: the {what} written so far is gone (neither {partial} nor "
                f"{final} holds its {size} bytes)",
                hint="start the run again without --resume",
            )
        shutil.copyfile(source, partial)
    if partial.stat().st_size < size:
        raise CheckpointError(
            f"--resume: {partial} is shorter ({partial.stat().st_size} bytes) than the "
            f"checkpoint says ({size})",
            hint="start the run again without --resume",
        )
    os.truncate(partial, size)


def _check(directory: Path, path: Path) -> tuple[str | None, dict[str, Any] | None]:
    """Why the manifest at ``path`` cannot be used (None: it can), and the manifest."""
    try:
        manifest = json.loads(path.read_bytes())
    except (OSError, ValueError) as err:
        return f"unreadable manifest ({type(err).__name__})", None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        return "not a manifest of this format", None
    claimed = manifest.pop("checksum", None)
    if claimed != _checksum(manifest):
        return "manifest checksum mismatch", None
    try:
        for seg in manifest["segments"]:
            for name, entry in seg["files"].items():
                file = directory / name
                if not file.is_file():
                    return f"{name} is missing", None
                data = file.read_bytes()
                digest = hashlib.sha256(data).hexdigest()
                if len(data) != entry["size"] or digest != entry["sha256"]:
                    return f"{name} is damaged (size or checksum)", None
    except (KeyError, TypeError, OSError) as err:
        return f"malformed manifest ({err})", None
    return None, manifest


def _manifests(directory: Path) -> Iterator[tuple[int, Path]]:
    for entry in os.listdir(directory):
        m = _MANIFEST.match(entry)
        if m is not None:
            yield int(m.group(1)), directory / entry


def _checksum(manifest: dict[str, Any]) -> str:
    body = {k: v for k, v in manifest.items() if k != "checksum"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _file_entry(data: bytes) -> dict[str, Any]:
    return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
