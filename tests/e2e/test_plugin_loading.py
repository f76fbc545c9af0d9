"""Cost-model plugins load only from what the user names: an installed entry point, a dotted
path on the installed packages / PYTHONPATH, a ``file.py:attr`` or a ``.toml`` file. Nothing in
the working directory is imported implicitly, whether hycq runs as ``python -m hycq.cli``
(which puts the working directory first on ``sys.path``) or as the ``hycq`` script.

Each hostile file writes a marker when imported: the marker must not appear.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
Q5 = ROOT / "queries" / "smartplug" / "q5.sql"

MODEL = """
from pathlib import Path
Path(__file__).with_name("IMPORTED").write_text(__name__)

class Model:
    name = "evil"

    def unit_cost(self, op, engine, estimates):
        return 1e-6

    def group_cost(self, group, estimates):
        return 1e-3
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A working directory with a hostile module and a hostile distribution in it."""
    (tmp_path / "evil.py").write_text(MODEL)
    dist = tmp_path / "evil-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[hycq.cost_models]\nsneaky = evil:Model\n")
    return tmp_path


def explain(folder: Path, spec: str, env: dict[str, str] | None = None, script: bool = False):
    cmd = [shutil.which("hycq") or "hycq"] if script else [sys.executable, "-m", "hycq.cli"]
    return subprocess.run(
        [*cmd, "explain", str(Q5), "--json", "--cost-model", spec],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize("spec", ["evil", "evil:Model", "evil.Model", "sneaky"])
def test_nothing_in_the_working_directory_is_imported(folder: Path, spec: str) -> None:
    done = explain(folder, spec)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: ") and "Traceback" not in done.stderr
    assert not (folder / "IMPORTED").exists()


def test_not_through_the_console_script_either(folder: Path) -> None:
    if shutil.which("hycq") is None:
        pytest.skip("the hycq console script is not installed")
    done = explain(folder, "evil:Model", script=True)
    assert done.returncode == 2 and "cannot import module 'evil'" in done.stderr
    assert not (folder / "IMPORTED").exists()


def test_a_named_file_or_pythonpath_loads_it(folder: Path) -> None:
    done = explain(folder, "./evil.py:Model")
    assert done.returncode == 0, done.stderr
    assert '"cost_model": "evil"' in done.stdout
    assert (folder / "IMPORTED").exists()
    (folder / "IMPORTED").unlink()
    done = explain(folder, "evil:Model", env={"PYTHONPATH": str(folder)})
    assert done.returncode == 0, done.stderr
    assert (folder / "IMPORTED").read_text() == "evil"


def test_a_toml_config_names_its_base_file_relative_to_itself(folder: Path) -> None:
    config = folder / "conf"
    config.mkdir()
    (config / "tuned.toml").write_text('[cost_model]\nbase = "../evil.py:Model"\n')
    done = explain(folder, "conf/tuned.toml")
    assert done.returncode == 0, done.stderr
    assert '"cost_model": "tuned"' in done.stdout and (folder / "IMPORTED").exists()


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("./missing.py:Model", "cost-model file not found"),
        ("./evil.py", "bad cost-model path"),
        ("./evil.py:Nope", "has no attribute 'Nope'"),
        ("some/dir/model", "bad cost-model path"),
    ],
)
def test_bad_plugin_paths_are_user_errors(folder: Path, spec: str, message: str) -> None:
    done = explain(folder, spec)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
