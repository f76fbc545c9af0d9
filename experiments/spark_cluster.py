"""Bring a Spark standalone cluster up or down on this machine (engines/spark/cluster.py):
a master and two workers (one core, 1 GB each), their own JVMs, on 127.0.0.1.

    python experiments/spark_cluster.py up        # prints the master URL
    hycq run queries/smartplug/q2.sql --placement column --column-engine spark \\
        --spark-conf spark.master=spark://127.0.0.1:PORT
    python experiments/spark_cluster.py status
    python experiments/spark_cluster.py down

State (logs, pid files, state.json) lives in --folder (default /tmp/hycq-spark-cluster).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engines.spark.cluster import SparkCluster, stop_folder  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("action", choices=("up", "down", "status"))
    ap.add_argument("--folder", type=Path, default=Path("/tmp/hycq-spark-cluster"))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--worker-memory", default="1g")
    args = ap.parse_args()
    state = args.folder / "state.json"
    if args.action == "up":
        if state.exists():
            print(f"a cluster is already up: {json.loads(state.read_text())['master']}")
            return 1
        cluster = SparkCluster(args.folder, args.workers, args.worker_memory)
        cluster.start()
        state.write_text(json.dumps({"master": cluster.master_url, "ui_port": cluster.ui_port}))
        print(cluster.master_url)
        return 0
    if args.action == "down":
        n = stop_folder(args.folder)
        state.unlink(missing_ok=True)
        print(f"stopped {n} daemons")
        return 0
    if not state.exists():
        print("no cluster is up")
        return 1
    s = json.loads(state.read_text())
    cluster = SparkCluster(args.folder, port=0, ui_port=s["ui_port"])
    alive = cluster.alive_workers()
    print(f"{s['master']}: {len(alive)} workers alive")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
