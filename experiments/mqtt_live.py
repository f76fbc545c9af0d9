"""MQTT live streams (issue 19): sustained throughput through a real Mosquitto broker against
the same data from a file, and end-to-end latency at a paced rate.

* ``throughput``: Q2 (the optimizer's hybrid plan) over ``--seconds`` of generated readings
  at ``--rate`` tuples per event-second, once from a raw CSV file and once published to the
  broker as fast as it acknowledges (``hycq data publish --pace max``, 1,000 rows per
  message) while ``hycq run --data readings=mqtt://...`` reads it; runs interleaved (file,
  MQTT, file, MQTT, ...), ``--repeat`` of each. Throughput = tuples / the run's wall time
  from the first tuple read (the run's own ``throughput`` metric for the file; for MQTT the
  tuples over the time from the publisher's start to the run's end, the subscription
  already made).
* ``latency``: the broker -> hycq -> broker path at a paced rate (``--pace realtime``, one
  message per 100 ms of data): instant T's result message, received by a subscriber, minus
  the wall time at which the first tuple after T was due (the one that lets T fire);
  p50 / p99 over the instants.

    python experiments/mqtt_live.py --repeat 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from experiments._common import Broker  # noqa: E402
from hycq.publish import publish  # noqa: E402

Q2 = ROOT / "queries" / "smartplug" / "q2.sql"
OUT = ROOT / "experiments" / "results"


def _hycq(*args: str) -> list[str]:
    return [sys.executable, "-m", "hycq.cli", *args]


def _file_run(data: Path, metrics: Path, placement: Path) -> float:
    subprocess.run(
        _hycq("run", str(Q2), "--data", f"readings={data}", "--metrics", str(metrics),
              "--placement", str(placement)),
        capture_output=True, text=True, check=True, cwd=ROOT,
    )  # fmt: skip
    m = json.loads(metrics.read_text())
    return float(m["tuples_in"] / m["wall_s"])


def _start(url: str, *args: str) -> subprocess.Popen[str]:
    p = subprocess.Popen(
        _hycq("run", str(Q2), "--data", f"readings={url}", *args),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    assert p.stderr is not None
    line = p.stderr.readline()
    if "subscribed" not in line:
        raise RuntimeError(line + p.stderr.read())
    return p


def _mqtt_run(broker: Broker, data: Path, metrics: Path, placement: Path, k: int) -> float:
    url = broker.url(f"bench/{k}")
    p = _start(url, "--metrics", str(metrics), "--placement", str(placement))
    publish(data, url, batch=1000)
    _, err = p.communicate(timeout=1800)
    if p.returncode != 0:
        raise RuntimeError(err)
    m = json.loads(metrics.read_text())
    # the run's own clock: from its start (already subscribed, the publisher starting at
    # once) to its last instant, as for the file
    return float(m["tuples_in"] / m["wall_s"])


def throughput(broker: Broker, folder: Path, rate: float, seconds: float, repeat: int) -> Any:
    data = folder / "readings.csv"
    subprocess.run(
        _hycq("data", "generate", "--out", str(data), "--seconds", f"{seconds:g}",
              "--rate", f"{rate:g}"),
        check=True, capture_output=True, cwd=ROOT,
    )  # fmt: skip
    # Q2's placement for this data (the optimizer's, from the file's sampled statistics): a
    # live stream is not sampled, and the catalog's statistics may place Q2 otherwise
    subprocess.run(
        _hycq("run", str(Q2), "--data", f"readings={data}", "--metrics", str(folder / "p.json")),
        capture_output=True, text=True, check=True, cwd=ROOT,
    )  # fmt: skip
    chosen = json.loads((folder / "p.json").read_text())["placement"]
    placement = folder / "placement.json"
    placement.write_text(json.dumps(chosen))
    runs: dict[str, list[float]] = {"file": [], "mqtt": []}
    for k in range(repeat):
        runs["file"].append(_file_run(data, folder / "f.json", placement))
        runs["mqtt"].append(_mqtt_run(broker, data, folder / "m.json", placement, k))
        print(json.dumps({k: round(v[-1]) for k, v in runs.items()}), flush=True)
    med = {k: statistics.median(v) for k, v in runs.items()}
    return {
        "rate": rate,
        "seconds": seconds,
        "tuples_per_s": {k: [round(x) for x in v] for k, v in runs.items()},
        "median": {k: round(v) for k, v in med.items()},
        "mqtt_over_file": med["mqtt"] / med["file"],
        "placement": chosen,
    }


def latency(broker: Broker, rate: float, seconds: float, k: int) -> Any:
    import paho.mqtt.client as mqtt

    src, res = broker.url(f"lat/{k}/in"), broker.url(f"lat/{k}/out")
    got: list[tuple[float, int]] = []
    ready = threading.Event()
    sub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"lat-{k}-{time.time_ns()}")
    sub.on_subscribe = lambda *a: ready.set()

    def on_message(c: Any, u: Any, msg: Any) -> None:
        first = msg.payload.split(b"\n", 1)[0]
        got.append((time.time(), int(json.loads(first)["_ts"])))

    sub.on_message = on_message
    sub.connect("127.0.0.1", broker.port)
    sub.loop_start()
    sub.subscribe(f"lat/{k}/out", qos=1)
    ready.wait(10)
    p = _start(src, "--output", res)
    batch = max(1, int(rate / 10))
    done = publish(Q2, src, rate=rate, duration=seconds, pace="realtime", batch=batch)
    assert done.first_wall is not None and done.first_ts is not None
    p.communicate(timeout=600)
    time.sleep(1)
    sub.disconnect()
    sub.loop_stop()
    if not got:
        raise RuntimeError("no results")
    # instant T fires when the first tuple of second T + 1 arrives: it was due (T + 1 -
    # first_ts) seconds after the first message (timestamps are whole seconds)
    lat = sorted((wall - (done.first_wall + (ts + 1 - done.first_ts))) * 1e3 for wall, ts in got)
    return {
        "rate": rate,
        "seconds": seconds,
        "instants": len(lat),
        "p50_ms": statistics.median(lat),
        "p99_ms": lat[min(len(lat) - 1, int(0.99 * len(lat)))],
        "max_ms": lat[-1],
        "message_rows": batch,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rate", type=float, default=40000)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--latency-seconds", type=float, default=60)
    args = ap.parse_args()
    started = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        broker = Broker(folder / "broker")
        try:
            result: dict[str, Any] = {
                "throughput": throughput(broker, folder, args.rate, args.seconds, args.repeat)
            }
            result["latency"] = []
            for k, rate in enumerate((2000.0, 20000.0)):
                point = latency(broker, rate, args.latency_seconds, k)
                print(json.dumps(point), flush=True)
                result["latency"].append(point)
        finally:
            broker.stop()
    result["command"] = (
        f"python experiments/mqtt_live.py --repeat {args.repeat} --rate {args.rate:g} "
        f"--seconds {args.seconds:g} --latency-seconds {args.latency_seconds:g}"
    )
    result["seconds_taken"] = round(time.time() - started)
    OUT.mkdir(exist_ok=True)
    (OUT / "mqtt_live.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
