"""A real Mosquitto broker for tests: started on 127.0.0.1 and a free port, with persistence
in a temporary folder (so a restart keeps persistent sessions and their queued messages),
stopped afterwards. Tests that need it skip when ``mosquitto`` is not installed (.ci/run
installs it from Debian)."""

from __future__ import annotations

import getpass
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

BINARY = shutil.which("mosquitto") or (
    "/usr/sbin/mosquitto" if Path("/usr/sbin/mosquitto").exists() else None
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Broker:
    """One mosquitto process; :meth:`restart` keeps its port and persistence folder."""

    def __init__(self, folder: Path) -> None:
        if BINARY is None:
            pytest.skip("mosquitto is not installed (apt-get install -y mosquitto)")
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.port = free_port()
        self.conf = folder / "mosquitto.conf"
        self.conf.write_text(
            f"listener {self.port} 127.0.0.1\n"
            "allow_anonymous true\n"
            # run as whoever runs the tests: as root, mosquitto would switch to its own user,
            # which cannot write the persistence file in our temporary folder
            f"user {getpass.getuser()}\n"
            "persistence true\n"
            f"persistence_location {folder}/\n"
            # saved every second, so a broker killed with SIGKILL keeps the sessions (and
            # their subscriptions) older than that, as a restarted production broker would
            "autosave_interval 1\n"
            # queued QoS 1 messages per offline client: the default 1000 would drop some
            "max_queued_messages 0\n"
        )
        self.log = folder / "mosquitto.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def url(self, topic: str) -> str:
        return f"mqtt://127.0.0.1:{self.port}/{topic}"

    def start(self) -> None:
        assert BINARY is not None
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen([BINARY, "-c", str(self.conf)], stdout=log, stderr=log)
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
        """A clean shutdown (SIGTERM): mosquitto saves its persistence file."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        self.proc = None

    def kill(self) -> None:
        """A crash (SIGKILL): nothing saved since the last autosave."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None

    def restart(self, down_s: float = 0.0) -> None:
        self.stop()
        time.sleep(down_s)
        self.start()
