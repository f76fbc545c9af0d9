"""The checkpoint example of README.md ("Checkpoints") and docs/checkpoints.md, run as written:
generate the file, start the run with ``--checkpoint``, kill it with SIGKILL, resume it. The
commands are taken from the documents (only ``hycq`` becomes this checkout's interpreter and
``queries/`` this checkout's folder; the rest runs in a temporary folder), so a change that
breaks the example breaks this test. The output must be the uninterrupted run's stream.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from tests.oracle import assert_same_stream

ROOT = Path(__file__).resolve().parents[2]


def bash_block(document: Path, heading: str) -> str:
    """The first ```bash block after the ``heading`` line of ``document``."""
    text = document.read_text()
    at = re.search(rf"(?m)^{re.escape(heading)}$", text)
    assert at is not None, f"no {heading!r} in {document.name}"
    block = re.search(r"```bash\n(.*?)```", text[at.end() :], re.DOTALL)
    assert block is not None, f"no bash block after {heading!r} in {document.name}"
    return block.group(1)


def runnable(script: str) -> str:
    """The documented commands with this checkout's interpreter and query folder."""
    script = re.sub(r"(?m)(^|; )hycq ", rf"\1{sys.executable} -m hycq.cli ", script)
    return script.replace(" queries/", f" {ROOT}/queries/")


def read_jsonl(path: Path) -> pa.Table:
    return pa.Table.from_pylist([json.loads(line) for line in path.read_text().splitlines()])


@pytest.mark.slow
@pytest.mark.parametrize(
    ("document", "heading"),
    [
        ("README.md", "## Checkpoints"),
        ("docs/checkpoints.md", "# Checkpoints: a long-running query that survives a crash"),
    ],
)
def test_the_documented_checkpoint_example_runs_as_written(
    tmp_path: Path, document: str, heading: str
) -> None:
    script = bash_block(ROOT / document, heading)
    assert "--checkpoint" in script and "--resume" in script and "kill -9" in script
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        ["bash", "-c", runnable(script)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "resumed from ckpt-" in done.stderr, done.stderr  # it continued, not started over
    assert (tmp_path / "ckpt" / "finished.json").exists()
    # the uninterrupted run of the same command
    command = next(line for line in script.splitlines() if line.startswith("hycq run"))
    query = command.split()[2]
    whole = subprocess.run(
        [sys.executable, "-m", "hycq.cli", "run", str(ROOT / query), "--data",
         "readings=plugs.csv", "--output", "whole.jsonl"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert whole.returncode == 0, whole.stderr
    expected = read_jsonl(tmp_path / "whole.jsonl")
    assert expected.num_rows > 0
    assert_same_stream(read_jsonl(tmp_path / "out.jsonl"), expected)
