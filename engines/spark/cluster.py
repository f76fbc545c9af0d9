"""A real Spark standalone cluster on this machine: one master and N workers, each its own
JVM started from the Spark distribution the pyspark wheel ships (``spark-class
org.apache.spark.deploy.master.Master`` / ``...worker.Worker``), bound to 127.0.0.1, one core
and bounded memory per worker. hycq's Spark engine connects to it with ``--spark-conf
spark.master=spark://127.0.0.1:PORT``; its executors then run in the workers' JVMs.

Used by ``experiments/spark_cluster.py up|down|status`` (a documented way to bring one up
by hand) and by the tests (tests/e2e/test_spark_cluster.py). Daemons write their logs and
pid files into ``folder``; :meth:`stop` kills them (and their executors)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"


def spark_home() -> Path:
    """The Spark distribution inside the installed pyspark package."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class SparkCluster:
    """A master and ``workers`` workers under ``folder`` (module docstring)."""

    folder: Path
    workers: int = 2
    worker_memory: str = "1g"
    port: int = field(default_factory=free_port)
    ui_port: int = field(default_factory=free_port)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["SPARK_HOME"] = str(spark_home())
        env["SPARK_LOCAL_IP"] = "127.0.0.1"
        env.setdefault("SPARK_DAEMON_MEMORY", "512m")
        return env

    def _spawn(self, name: str, args: list[str]) -> None:
        cmd = [str(spark_home() / "bin" / "spark-class"), *args]
        with (self.folder / f"{name}.log").open("ab") as log:  # the daemon keeps its copy
            self.procs[name] = subprocess.Popen(
                cmd, stdout=log, stderr=log, env=self._env(), start_new_session=True
            )
        (self.folder / f"{name}.pid").write_text(str(self.procs[name].pid))

    def start(self, timeout: float = 120) -> None:
        """Start the master and the workers; returns once every worker is ALIVE."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self._spawn(
            "master",
            [MASTER, "--host", "127.0.0.1", "--port", str(self.port),
             "--webui-port", str(self.ui_port)],
        )  # fmt: skip
        for k in range(self.workers):
            self.start_worker(k)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.alive_workers()) >= self.workers:
                return
            for name, p in self.procs.items():
                if p.poll() is not None:
                    raise RuntimeError(f"spark {name} exited: see {self.folder / name}.log")
            time.sleep(0.5)
        raise RuntimeError(f"spark workers did not register in {timeout:g} s ({self.folder})")

    def start_worker(self, k: int) -> None:
        work = self.folder / f"work{k}"
        work.mkdir(exist_ok=True)
        self._spawn(
            f"worker{k}",
            [WORKER, self.master_url, "--host", "127.0.0.1", "--cores", "1",
             "--memory", self.worker_memory, "--webui-port", str(free_port()),
             "--work-dir", str(work)],
        )  # fmt: skip

    def status(self) -> dict[str, Any]:
        """The master's JSON status (workers, applications); {} when it does not answer."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as r:
                return dict(json.loads(r.read()))
        except (OSError, ValueError):
            return {}

    def alive_workers(self) -> list[dict[str, Any]]:
        return [w for w in self.status().get("workers", []) if w.get("state") == "ALIVE"]

    def kill(self, name: str) -> None:
        """SIGKILL a daemon and everything it started (a worker's executor JVMs)."""
        p = self.procs.pop(name, None)
        if p is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=30)

    def stop(self) -> None:
        for name in sorted(self.procs, reverse=True):  # workers first, the master last
            self.kill(name)


def stop_folder(folder: Path) -> int:
    """Kill the daemons whose pid files are in ``folder`` (a cluster started by another
    process: ``experiments/spark_cluster.py down``); returns how many were running."""
    killed = 0
    for pid_file in sorted(folder.glob("*.pid")):
        try:
            os.killpg(int(pid_file.read_text()), signal.SIGKILL)
            killed += 1
        except (ProcessLookupError, ValueError, PermissionError):
            pass
        pid_file.unlink()
    return killed
