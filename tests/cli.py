"""The one way tests run the ``hycq`` command in-process: no interpreter start per case, the
same code path as the installed command (``hycq.cli.main``). Tests start a subprocess only
for what needs a process of its own (signals, SIGKILL, standard input, a clean environment).
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hycq.cli import main

ROOT = Path(__file__).resolve().parents[1]


def run_main(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str]:
    """``hycq ARGS`` in-process under pytest's capture: (exit status, stderr)."""
    try:
        code = main([str(a) for a in args])
    except SystemExit as exc:  # argparse errors, --help, --version
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


@contextlib.contextmanager
def _directory(cwd: Path | None) -> Iterator[None]:
    before = Path.cwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(before)


def run_cli(*args: str | Path, cwd: Path | None = ROOT) -> subprocess.CompletedProcess[str]:
    """``hycq ARGS`` in-process, with what a subprocess would give: the exit status and the
    text of stdout and stderr (both also as bytes through ``.buffer``), run from ``cwd``."""
    argv = [str(a) for a in args]
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", newline="")
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", newline="")
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        with _directory(cwd):
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    finally:
        sys.stdout, sys.stderr = saved
    texts = []
    for stream in (out, err):
        stream.flush()
        raw = stream.buffer
        assert isinstance(raw, io.BytesIO)
        texts.append(raw.getvalue().decode("utf-8", errors="replace"))
    return subprocess.CompletedProcess(["hycq", *argv], code, texts[0], texts[1])
