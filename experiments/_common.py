"""Helpers shared by the experiment scripts that have no place in the hycq package.

Experiments never import ``tests/``: what a script needs from a test helper is copied here in
its minimal form. ``Broker`` is the Mosquitto broker of ``tests/mqtt.py`` without pytest (a
missing ``mosquitto`` is an error here, not a skip) and without restarts, which only tests
need.
"""

from __future__ import annotations

import getpass
import shutil
import socket
import subprocess
import time
from pathlib import Path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def mosquitto_binary() -> str | None:
    """The ``mosquitto`` executable, or None when it is not installed."""
    found = shutil.which("mosquitto")
    if found is not None:
        return found
    return "/usr/sbin/mosquitto" if Path("/usr/sbin/mosquitto").exists() else None


class Broker:
    """One mosquitto process on 127.0.0.1 and a free port, its persistence in ``folder``;
    started on construction, stopped by :meth:`stop`."""

    def __init__(self, folder: Path) -> None:
        binary = mosquitto_binary()
        if binary is None:
            raise SystemExit("error: mosquitto is not installed (apt-get install -y mosquitto)")
        self.binary = binary
        folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.conf = folder / "mosquitto.conf"
        self.conf.write_text(
            f"listener {self.port} 127.0.0.1\n"
            "allow_anonymous true\n"
            # as root, mosquitto would switch to its own user, which cannot write the
            # persistence file in our temporary folder
            f"user {getpass.getuser()}\n"
            "persistence true\n"
            f"persistence_location {folder}/\n"
            # queued QoS 1 messages per offline client: the default 1000 would drop some
            "max_queued_messages 0\n"
        )
        self.log = folder / "mosquitto.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._start()

    def url(self, topic: str) -> str:
        """The ``mqtt://`` URL of ``topic`` on this broker (hycq's source and sink syntax)."""
        return f"mqtt://127.0.0.1:{self.port}/{topic}"

    def _start(self) -> None:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [self.binary, "-c", str(self.conf)], stdout=log, stderr=log
            )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
        raise RuntimeError(f"mosquitto did not start: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        """A clean shutdown (SIGTERM)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        self.proc = None
