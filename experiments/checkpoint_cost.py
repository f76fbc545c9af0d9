"""Checkpoints (issue 19 section 4): their time and size against the window size, the cost
of a resume, and what checkpointing costs a run.

A per-plug sliding AVG (``RANGE W SECONDS SLIDE 1 SECOND``) over generated readings at
``--rate`` tuples per event-second, for each window W: the run checkpointed every
``--every`` wall seconds against the same run without checkpoints, interleaved (plain,
checkpointed, plain, ...), ``--repeat`` of each; medians. Recorded per W:

* the tuples a window holds (W x rate) and the bytes the last checkpoint needs on disk
  (its segments: the engine's log cut to the windows' horizon, as Arrow IPC);
* the median and largest time to write a checkpoint (it writes only the log since the
  previous one, then its manifest; fsync included);
* the resume: the finished run's folder is reopened as if it had crashed after its last
  checkpoint (its ``finished.json`` removed) and resumed; the replay of the log and the
  re-reading of the generator up to the checkpoint position, in seconds;
* throughput with and without checkpoints (their ratio).

    python experiments/checkpoint_cost.py --repeat 3
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engines.runtime import RunOptions  # noqa: E402
from engines.runtime.checkpoint import CheckpointOptions  # noqa: E402
from engines.runtime.checkpoint_store import FINISHED  # noqa: E402
from hycq import api  # noqa: E402

OUT = ROOT / "experiments" / "results"
CATALOG = ROOT / "queries" / "smartplug" / "catalog.toml"
QUERY = """
SELECT house_id, household_id, plug_id, AVG(value) AS avg_load
FROM readings [RANGE {w} SECONDS SLIDE 1 SECOND]
WHERE property = 1
GROUP BY house_id, household_id, plug_id
"""


def _run(q: Any, folder: Path, seconds: float, rate: float, ckpt: Any) -> dict[str, Any]:
    out = folder / "out.jsonl"
    if ckpt is None or not ckpt.resume:
        out.unlink(missing_ok=True)
    options = RunOptions(rate=rate, duration=seconds, output=str(out), checkpoint=ckpt)
    return dict(api.run(q, options, "column").metrics)


def measure(window: int, rate: float, every: float, repeat: int, extra: int) -> dict[str, Any]:
    seconds = window + extra
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        sql = folder / "avg.sql"
        sql.write_text(QUERY.format(w=window))
        q = api.load_query(str(sql), CATALOG)
        plain, checked, writes, resumes = [], [], [], []
        for _ in range(repeat):
            plain.append(_run(q, folder, seconds, rate, None)["throughput"])
            shutil.rmtree(folder / "ckpt", ignore_errors=True)
            m = _run(q, folder, seconds, rate, CheckpointOptions(folder / "ckpt", every))
            checked.append(m["throughput"])
            writes.append(m["checkpoint"])
            (folder / "ckpt" / FINISHED).unlink()
            start = time.perf_counter()
            r = _run(q, folder, seconds, rate, CheckpointOptions(folder / "ckpt", every, True))
            resumed = dict(r["checkpoint"]["resumed"])
            resumed["wall_s"] = time.perf_counter() - start
            resumes.append(resumed)
    last = writes[-1]
    return {
        "window_s": window,
        "rate": rate,
        "window_tuples": int(window * rate),
        "seconds": seconds,
        "checkpoints": statistics.median(w["written"] for w in writes),
        "write_ms_p50": statistics.median(w["write_ms"]["p50"] for w in writes),
        "write_ms_max": max(w["write_ms"]["max"] for w in writes),
        "checkpoint_mb": last["last_bytes"] / 1e6,
        "bytes_per_window_tuple": last["last_bytes"] / (window * rate),
        "replayed_rows": statistics.median(r["replayed_rows"] for r in resumes),
        "replay_s": statistics.median(r["replay_s"] for r in resumes),
        "skipped_rows": statistics.median(r["skipped_rows"] for r in resumes),
        "resume_wall_s": statistics.median(r["wall_s"] for r in resumes),
        "throughput_plain": statistics.median(plain),
        "throughput_checkpointed": statistics.median(checked),
        "ratio": statistics.median(checked) / statistics.median(plain),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--windows", default="30,120,300", help="window sizes in seconds")
    p.add_argument("--rate", type=float, default=10_000.0)
    p.add_argument("--every", type=float, default=2.0, help="seconds between checkpoints")
    p.add_argument("--extra", type=int, default=60, help="event-seconds after the first window")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    rows = []
    for w in (int(x) for x in args.windows.split(",")):
        row = measure(w, args.rate, args.every, args.repeat, args.extra)
        rows.append(row)
        print(json.dumps(row), flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    record = {
        "command": "python experiments/checkpoint_cost.py " + " ".join(sys.argv[1:]),
        "rows": rows,
    }
    (OUT / "checkpoint_cost.json").write_text(json.dumps(record, indent=2))
    print(f"{'W s':>5} {'tuples':>9} {'ckpt MB':>8} {'B/tuple':>8} {'write ms p50/max':>17} "
          f"{'replay s':>9} {'resume s':>9} {'ratio':>6}")  # fmt: skip
    for r in rows:
        print(
            f"{r['window_s']:>5} {r['window_tuples']:>9,} {r['checkpoint_mb']:>8.1f} "
            f"{r['bytes_per_window_tuple']:>8.1f} "
            f"{r['write_ms_p50']:>8.0f}/{r['write_ms_max']:<8.0f} {r['replay_s']:>9.2f} "
            f"{r['resume_wall_s']:>9.2f} {r['ratio']:>6.2f}"
        )


if __name__ == "__main__":
    main()
