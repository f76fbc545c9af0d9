"""Peer (a): Spark Structured Streaming on the per-plug sliding AVG (5-minute
windows sliding 1 second), against hycq's chosen plan, in one process.

Spark reads one Parquet file per event-second of generated data (40,000 tuples per file at
``--rate 40000``) as a file stream, one file per micro-batch, and runs
``groupBy(window(t, '5 minutes', '1 second'), plug).avg(value)`` with a watermark in update
mode into a no-op sink. Throughput = tuples / wall time of ``--seconds`` files after
``--warm`` warm-up files (state then holds the windows of the warm-up). hycq's number is
``hycq bench`` with the optimizer's plan at the same rate.

Q1-Q6 are not run on Spark: each joins every tuple of a window with an aggregate of that
same sliding window (Q1-Q4, Q6), or aggregates an aggregate (Q5). In Structured Streaming a
windowed aggregate feeds another stateful operator only in append mode, once per window
after the watermark, so the per-slide correlated result needs a rewrite (raw stream joined
with the aggregate stream on the window bounds over 300 overlapping windows) that this
script does not attempt (experiments/README.md).

    SPARK_LOCAL_IP=127.0.0.1 python experiments/peer_spark_streaming.py --rate 40000 \\
        --warm 5 --seconds 10 --json experiments/results/peer_spark_streaming.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

from engines.sources.smartplug import SmartPlugGenerator
from hycq.api import QUERIES, load_query
from hycq.bench import BenchOptions, bench

PLUG = "house_id, household_id, plug_id"
AVG_CQL = (
    f"SELECT {PLUG}, AVG(value) AS avg_load FROM readings [RANGE 5 MINUTES SLIDE 1 SECOND] "
    f"WHERE property = 1 GROUP BY {PLUG}"
)


def spark_throughput(rate: float, warm: int, seconds: int) -> dict[str, float]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "4g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    src = Path(tempfile.mkdtemp(prefix="hycq-sss-"))
    gen = SmartPlugGenerator(rate=rate)
    rows = []
    for k, batch in enumerate(gen.batches(warm + seconds)):
        pq.write_table(
            __import__("pyarrow").Table.from_batches([batch]), src / f"part-{k:05d}.parquet"
        )
        rows.append(batch.num_rows)
    schema = spark.read.parquet(str(src / "part-00000.parquet")).schema
    stream = (
        spark.readStream.schema(schema)
        .option("maxFilesPerTrigger", 1)
        .parquet(str(src))
        .where("property = 1")
        .withColumn("t", F.col("ts").cast("timestamp"))
        .withWatermark("t", "0 seconds")
        .groupBy(F.window("t", "5 minutes", "1 second"), "house_id", "household_id", "plug_id")
        .agg(F.avg("value").alias("avg_load"))
    )
    ckpt = Path(tempfile.mkdtemp(prefix="hycq-sss-ckpt-"))
    query = (
        stream.writeStream.format("noop")
        .outputMode("update")
        .option("checkpointLocation", str(ckpt))
        .start()
    )
    marks: list[tuple[int, float]] = []
    try:
        while True:
            progress = query.lastProgress
            done = 0 if progress is None else int(progress["batchId"]) + 1
            if not marks or marks[-1][0] != done:
                marks.append((done, time.perf_counter()))
            if done >= warm + seconds:
                break
            if query.exception() is not None:
                raise RuntimeError(str(query.exception()))
            time.sleep(0.05)
    finally:
        query.stop()
        spark.stop()
        shutil.rmtree(src, ignore_errors=True)
        shutil.rmtree(ckpt, ignore_errors=True)
    start = next(t for b, t in marks if b >= warm)
    end = marks[-1][1]
    tuples = sum(rows[warm : warm + seconds])
    return {"throughput": tuples / (end - start), "tuples": tuples, "wall_s": end - start}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rate", type=float, default=40000)
    ap.add_argument("--warm", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    spark = spark_throughput(args.rate, args.warm, args.seconds)
    print(f"Spark Structured Streaming: {spark['throughput']:,.0f} tuples/s", file=sys.stderr)
    tmp = Path(tempfile.mkdtemp(prefix="hycq-peer-"))
    (tmp / "avg.sql").write_text(AVG_CQL + "\n")
    (tmp / "catalog.toml").write_text((QUERIES / "smartplug" / "catalog.toml").read_text())
    rec = bench(
        [load_query(tmp / "avg.sql")],
        BenchOptions(rates=[args.rate], plans=["auto"], measure_seconds=10, repeat=3),
    )[0]
    hycq_tp = rec["measured"]["throughput"]
    ratio = hycq_tp / spark["throughput"]
    print(f"hycq: {hycq_tp:,.0f} tuples/s ({ratio:.1f}x Spark)", file=sys.stderr)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "command": " ".join(["python", *sys.argv]),
                    "rate": args.rate,
                    "spark": spark,
                    "hycq": hycq_tp,
                    "hycq_placement": rec["placement"],
                    "ratio": ratio,
                },
                indent=2,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
