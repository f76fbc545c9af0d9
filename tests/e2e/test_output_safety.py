"""Output files never destroy anything: not an input, not another output, not a device.

Every output hycq writes at a user's path (``run --output/--metrics/--dead-letter/--report``
and the ``--checkpoint`` folder's partial files, ``report --out``, ``bench --json/--plot``,
``calibrate --out``, ``data generate --out`` and the files it writes into a folder):

* is refused (exit 2, before any work, naming both) when it is the same file as an input
  (``calibrate --from`` included) or another output, whether by the same name, through a
  symlink or as a hard link;
* replaces the *target* of a symlink (atomically, in the target's folder): the link stays;
* is written in place into a FIFO or character device, never renamed over it;
* gets the mode ``0666 & ~umask`` (or keeps the mode of the file it replaces);
* fails with exit 2 ``cannot write PATH: reason`` on a full disk (``/dev/full`` through a
  symlink named like the output; a real full tmpfs when this machine lets us mount one), a
  read-only folder (a read-only tmpfs as root, mode 0555 otherwise), or a folder given as
  the file, before any long work;
* leaves no temporary file on any exit path (signals: tests/e2e/test_signals.py).

Most cases call ``hycq.cli.main`` in-process (same code, no interpreter start per case).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from tests.cli import run_main

ROOT = Path(__file__).resolve().parents[2]
Q1 = ROOT / "queries" / "smartplug" / "q1.sql"
CATALOG = ROOT / "queries" / "smartplug" / "catalog.toml"
ROWS = "".join(f"{i},{1377986401 + i // 4},{i * 1.5},1,{i % 3},0,0\n" for i in range(40))


def assert_user_error(code: int, err: str, *parts: str, after_work: bool = False) -> None:
    """Exit 2 and one error message (the only output, unless it comes ``after_work``: a
    failure to write a result after the work's progress lines)."""
    assert code == 2, (code, err)
    assert err.count("error: ") == 1, err
    assert err.startswith("error: ") or (after_work and "\nerror: " in err), err
    assert "Traceback" not in err and "internal error" not in err, err
    for part in parts:
        assert part in err, (part, err)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def no_temporaries(*folders: Path) -> None:
    for folder in folders:
        left = [p.name for p in folder.rglob(".*.tmp")]
        assert not left, f"temporary files left in {folder}: {left}"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A folder with a query, its catalog, data, a placement file and a cost-model file."""
    (tmp_path / "q.sql").write_text(Q1.read_text())
    (tmp_path / "catalog.toml").write_text(CATALOG.read_text())
    (tmp_path / "d.csv").write_text(ROWS)
    (tmp_path / "bad.csv").write_text(ROWS + "x,1377986500,1.0,1,0,0,0\n")
    (tmp_path / "p.json").write_text('{"aggregate1": "row"}')
    (tmp_path / "cm.toml").write_text('[cost_model]\nbase = "analytical"\n')
    return tmp_path


RUN = ("run", "q.sql", "--data", "readings=d.csv")


# -- an output that is an input or another output -----------------------------------------


def _link(work: Path, how: str, target: str, name: str) -> str:
    """``name`` made to be ``target``: the same name, a symlink or a hard link."""
    if how == "same":
        return target
    if how == "symlink":
        (work / name).symlink_to(work / target)
    elif how == "symlink-chain":
        (work / f"mid{Path(name).suffix}").symlink_to(work / target)
        (work / name).symlink_to(work / f"mid{Path(name).suffix}")
    else:
        os.link(work / target, work / name)
    return name


INPUT_CASES = [
    ("--output", "d.csv", "o.csv", ()),
    ("--metrics", "q.sql", "m.json", ()),
    ("--dead-letter", "catalog.toml", "dl.jsonl", ()),
    ("--report", "p.json", "r.html", ("--placement", "p.json")),
    ("--output", "cm.toml", "o.jsonl", ("--cost-model", "cm.toml")),
]


@pytest.mark.parametrize(
    ("how", "option", "target", "name", "extra"),
    [
        (how, *case)
        for case in INPUT_CASES
        for how in ("same", "symlink", "symlink-chain", "hardlink")
        # the same name with another suffix is refused by the suffix check first
        if how != "same" or case[0] not in ("--report", "--output") or case[1] == "d.csv"
    ],
)
def test_run_refuses_to_write_over_an_input(
    capsys: pytest.CaptureFixture[str],
    work: Path,
    monkeypatch: pytest.MonkeyPatch,
    how: str,
    option: str,
    target: str,
    name: str,
    extra: tuple[str, ...],
) -> None:
    monkeypatch.chdir(work)
    before = {p.name: digest(p) for p in work.iterdir() if p.is_file()}
    path = _link(work, how, target, name)
    code, err = run_main(capsys, *RUN, *extra, option, path)
    assert_user_error(code, err, f"{option} {path} is the same file as", "never writes over")
    assert "tuples in" not in err  # refused before the run
    assert {p: digest(work / p) for p in before} == before
    no_temporaries(work)


@pytest.mark.parametrize("how", ["same", "symlink", "hardlink"])
@pytest.mark.parametrize(
    ("first", "second"),
    [("--output", "--metrics"), ("--metrics", "--dead-letter"), ("--output", "--dead-letter")],
)
def test_two_outputs_may_not_be_one_file(
    capsys: pytest.CaptureFixture[str],
    work: Path,
    monkeypatch: pytest.MonkeyPatch,
    how: str,
    first: str,
    second: str,
) -> None:
    monkeypatch.chdir(work)
    (work / "x.jsonl").write_text("keep me\n")
    other = _link(work, how, "x.jsonl", "y.jsonl")
    code, err = run_main(capsys, *RUN, first, "x.jsonl", second, other)
    assert_user_error(code, err, f"{first} and {second} name the same file")
    assert (work / "x.jsonl").read_text() == "keep me\n"
    no_temporaries(work)


def test_other_commands_refuse_to_write_over_their_inputs(
    capsys: pytest.CaptureFixture[str], work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(work)
    before = digest(work / "q.sql")
    (work / "q.html").symlink_to(work / "q.sql")
    assert_user_error(*run_main(capsys, "report", "q.sql", "--out", "q.html"), "same file")
    (work / "b.json").write_text("[]")
    code, err = run_main(capsys, "report", "q.sql", "--bench", "b.json", "--out", "q.html")
    assert_user_error(code, err, "same file")
    (work / "q.json").symlink_to(work / "q.sql")
    code, err = run_main(capsys, "bench", "q.sql", "--rates", "100", "--json", "q.json")
    assert_user_error(code, err, "--json q.json is the same file as query file q.sql")
    (work / "d.png").symlink_to(work / "d.csv")
    code, err = run_main(
        capsys, "bench", "q.sql", "--rates", "100", "--data", "readings=d.csv", "--plot", "d.png"
    )
    assert_user_error(code, err, "--plot d.png is the same file as --data d.csv")
    code, err = run_main(capsys, "bench", "q.sql", "--json", "o.json", "--plot", "o.json")
    assert_user_error(code, err)  # --plot must be .png (checked first)
    assert digest(work / "q.sql") == before and "measuring" not in err


def test_a_catalog_file_source_is_an_input(
    capsys: pytest.CaptureFixture[str], work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(work)
    text = CATALOG.read_text().split("[streams.readings.source]")[0]
    (work / "catalog.toml").write_text(
        text + '[streams.readings.source]\nkind = "file"\npath = "d.csv"\n'
    )
    code, err = run_main(capsys, "run", "q.sql", "--output", "d.csv")
    assert_user_error(code, err, "the catalog's source of 'readings'")
    assert (work / "d.csv").read_text() == ROWS


# -- symlinks, FIFOs and devices ------------------------------------------------------------


@pytest.mark.parametrize("option", ["--output", "--metrics", "--dead-letter"])
def test_a_symlink_keeps_pointing_at_the_new_file(
    capsys: pytest.CaptureFixture[str],
    work: Path,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    option: str,
) -> None:
    monkeypatch.chdir(work)
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    real = elsewhere / "real.jsonl"
    real.write_text("old\n")
    (work / "link.jsonl").symlink_to(real)
    code, err = run_main(capsys, "run", "q.sql", "--data", "readings=bad.csv", option, "link.jsonl")
    assert code == 0, err
    assert (work / "link.jsonl").is_symlink() and os.readlink(work / "link.jsonl") == str(real)
    text = real.read_text()
    assert text != "old\n" and text.strip()
    if option == "--metrics":
        assert json.loads(text)["tuples_in"] == 40
    else:
        assert all(json.loads(line) for line in text.splitlines())
    no_temporaries(work, elsewhere)


@pytest.mark.parametrize("option", ["--output", "--metrics", "--dead-letter", "--report"])
def test_devices_are_written_in_place_never_replaced(
    capsys: pytest.CaptureFixture[str], work: Path, monkeypatch: pytest.MonkeyPatch, option: str
) -> None:
    monkeypatch.chdir(work)
    name = {"--output": "o.csv", "--report": "r.html"}.get(option, "x.jsonl")
    (work / name).symlink_to("/dev/null")
    code, err = run_main(capsys, "run", "q.sql", "--data", "readings=bad.csv", option, name)
    assert code == 0, err
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert (work / name).is_symlink() and os.readlink(work / name) == "/dev/null"
    no_temporaries(work)


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_a_fifo_output_is_streamed_into(work: Path, suffix: str) -> None:
    fifo = work / f"pipe{suffix}"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    proc = subprocess.run(
        [sys.executable, "-m", "hycq.cli", *RUN, "--output", fifo.name, "--placement", "row"],
        cwd=work, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    reader.join(30)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # still a FIFO
    (work / f"file{suffix}").write_bytes(got[0])
    regular = work / f"regular{suffix}"
    done = subprocess.run(
        [sys.executable, "-m", "hycq.cli", *RUN, "--output", regular.name, "--placement", "row"],
        cwd=work, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    if suffix == ".parquet":
        assert pq.read_table(work / f"file{suffix}").equals(pq.read_table(regular))
    elif suffix == ".csv":
        assert pacsv.read_csv(work / f"file{suffix}").equals(pacsv.read_csv(regular))
    else:
        assert got[0] == regular.read_bytes()


def test_stdout_through_a_symlink(work: Path) -> None:
    (work / "out.jsonl").symlink_to("/dev/stdout")
    proc = subprocess.run(
        [sys.executable, "-m", "hycq.cli", *RUN, "--output", "out.jsonl"],
        cwd=work, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert rows and all("_ts" in r for r in rows)
    assert (work / "out.jsonl").is_symlink()


def test_other_kinds_of_file_are_refused(
    capsys: pytest.CaptureFixture[str], work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    monkeypatch.chdir(work)
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(work / "s.json"))
    try:
        code, err = run_main(capsys, *RUN, "--metrics", "s.json")
    finally:
        sock.close()
    assert_user_error(code, err, "not a regular file, a FIFO or a character device")


# -- modes ----------------------------------------------------------------------------------


@pytest.fixture
def umask() -> Iterator[None]:
    old = os.umask(0o027)
    yield
    os.umask(old)


@pytest.mark.usefixtures("umask")
def test_new_files_honour_the_umask(
    capsys: pytest.CaptureFixture[str], work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(work)
    names = ["o.parquet", "m.json", "dl.jsonl", "r.html"]
    code, err = run_main(
        capsys, "run", "q.sql", "--data", "readings=bad.csv", "--output", "o.parquet",
        "--metrics", "m.json", "--dead-letter", "dl.jsonl", "--report", "r.html",
    )  # fmt: skip
    assert code == 0, err
    code, err = run_main(capsys, "data", "generate", "--out", "g.csv", "--seconds", "2")
    assert code == 0, err
    code, err = run_main(capsys, "report", "q.sql", "--out", "r2.html")
    assert code == 0, err
    for name in [*names, "g.csv", "r2.html"]:
        assert stat.S_IMODE(os.stat(work / name).st_mode) == 0o640, name
    os.chmod(work / "m.json", 0o604)  # a file that is replaced keeps its mode
    assert (
        run_main(capsys, "run", "q.sql", "--data", "readings=d.csv", "--metrics", "m.json")[0] == 0
    )
    assert stat.S_IMODE(os.stat(work / "m.json").st_mode) == 0o604


# -- write errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "name"),
    [
        (("--output", "full.parquet"), "full.parquet"),
        (("--output", "full.csv"), "full.csv"),
        (("--output", "full.jsonl"), "full.jsonl"),
        (("--metrics", "full.json"), "full.json"),
        (("--dead-letter", "full.jsonl"), "full.jsonl"),
        (("--report", "full.html"), "full.html"),
    ],
)
def test_a_full_device_is_a_clear_error(
    capsys: pytest.CaptureFixture[str],
    work: Path,
    monkeypatch: pytest.MonkeyPatch,
    args: tuple[str, ...],
    name: str,
) -> None:
    monkeypatch.chdir(work)
    (work / name).symlink_to("/dev/full")
    code, err = run_main(capsys, "run", "q.sql", "--data", "readings=bad.csv", *args)
    assert_user_error(
        code, err, f"cannot write {name}: No space left on device", "hint:", after_work=True
    )
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
    no_temporaries(work)


@pytest.mark.parametrize(
    "args",
    [
        ("data", "generate", "--out", "full.csv", "--seconds", "5"),
        ("data", "generate", "--out", "full.parquet", "--seconds", "5"),
        ("report", "q.sql", "--out", "full.html"),
        ("bench", "q.sql", "--rates", "500", "--plans", "row", "--measure", "1", "--repeat",
         "1", "--json", "full.json"),
        ("bench", "q.sql", "--rates", "500", "--plans", "row", "--measure", "1", "--repeat",
         "1", "--plot", "full.png"),
    ],
    ids=lambda a: " ".join(a[:2]) + " " + a[-1],
)  # fmt: skip
def test_a_full_device_fails_every_command_cleanly(
    capsys: pytest.CaptureFixture[str],
    work: Path,
    monkeypatch: pytest.MonkeyPatch,
    args: tuple[str, ...],
) -> None:
    monkeypatch.chdir(work)
    (work / args[-1 if args[0] != "data" else 3]).symlink_to("/dev/full")
    code, err = run_main(capsys, *args)
    assert_user_error(code, err, "No space left on device", after_work=True)
    no_temporaries(work)


def _mount_tmpfs(path: Path, options: str) -> bool:
    if os.geteuid() != 0:
        return False
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True
    )
    return done.returncode == 0


@pytest.fixture
def full_disk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A real 256 KiB tmpfs (root only; skipped where mounting is not allowed)."""
    path = tmp_path_factory.mktemp("full")
    if not _mount_tmpfs(path, "size=256k"):
        pytest.skip("cannot mount a tmpfs here (not root, or no CAP_SYS_ADMIN)")
    yield path
    subprocess.run(["umount", str(path)], check=False)


@pytest.fixture
def read_only(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A folder hycq cannot create files in: a read-only tmpfs as root, else mode 0555."""
    path = tmp_path_factory.mktemp("ro")
    if os.geteuid() == 0:
        if not _mount_tmpfs(path, "ro,size=64k"):
            pytest.skip("root, but cannot mount a read-only tmpfs here")
        yield path
        subprocess.run(["umount", str(path)], check=False)
    else:
        path.chmod(0o555)
        yield path
        path.chmod(0o755)


@pytest.mark.parametrize(
    ("args", "part"),
    [
        # a generation knows its size: refused before writing (engines/sources/budget.py)
        (("data", "generate", "--seconds", "600", "--out", "{}/big.csv"), "free in"),
        (("data", "generate", "--seconds", "600", "--out", "{}/big.parquet"), "free in"),
        (("run", "q.sql", "--duration", "300", "--placement", "row", "--output", "{}/o.jsonl"),
         "No space left on device"),
    ],
    ids=["generate csv", "generate parquet", "run jsonl"],
)  # fmt: skip
def test_a_real_full_disk_is_a_clear_error(
    capsys: pytest.CaptureFixture[str],
    work: Path,
    full_disk: Path,
    monkeypatch: pytest.MonkeyPatch,
    args: tuple[str, ...],
    part: str,
) -> None:
    monkeypatch.chdir(work)
    code, err = run_main(capsys, *(a.format(full_disk) for a in args))
    assert_user_error(code, err, part)
    assert list(full_disk.iterdir()) == []  # no partial output, no temporary file


@pytest.mark.parametrize(
    ("args", "part"),
    [
        (("run", "q.sql", "--output", "{}/o.csv"), "cannot write"),
        (("run", "q.sql", "--metrics", "{}/m.json"), "cannot write"),
        (("run", "q.sql", "--dead-letter", "{}/dl.jsonl"), "cannot write"),
        (("run", "q.sql", "--report", "{}/r.html"), "cannot write"),
        (("report", "q.sql", "--out", "{}/r.html"), "cannot write"),
        (("bench", "q.sql", "--rates", "100", "--json", "{}/b.json"), "cannot write"),
        (("calibrate", "--quick", "--engines", "row", "--out", "{}/c.json"), "cannot write"),
        (("data", "generate", "--out", "{}/g.csv"), "cannot write"),
    ],
    ids=lambda a: " ".join(a[:1] + a[-2:-1]) if isinstance(a, tuple) else None,
)
def test_a_read_only_folder_fails_before_any_work(
    capsys: pytest.CaptureFixture[str],
    work: Path,
    read_only: Path,
    monkeypatch: pytest.MonkeyPatch,
    args: tuple[str, ...],
    part: str,
) -> None:
    monkeypatch.chdir(work)
    code, err = run_main(capsys, *(a.format(read_only) for a in args))
    assert_user_error(code, err, part, str(read_only))
    assert "measuring" not in err and "tuples in" not in err


@pytest.mark.parametrize(
    "args",
    [
        ("bench", "q.sql", "--rates", "100", "--json", "adir"),
        ("bench", "q.sql", "--rates", "100", "--plot", "adir.png"),
        ("calibrate", "--quick", "--engines", "row", "--out", "adir"),
        ("data", "generate", "--out", "adir.csv"),
        ("report", "q.sql", "--out", "adir.html"),
        ("run", "q.sql", "--output", "adir.csv"),
        ("run", "q.sql", "--metrics", "adir"),
        ("run", "q.sql", "--report", "adir.html"),
    ],
    ids=lambda a: f"{a[0]} {a[-2]}",
)
def test_a_folder_given_as_the_file_fails_before_any_work(
    capsys: pytest.CaptureFixture[str],
    work: Path,
    monkeypatch: pytest.MonkeyPatch,
    args: tuple[str, ...],
) -> None:
    monkeypatch.chdir(work)
    for name in ("adir", "adir.png", "adir.csv", "adir.html"):
        (work / name).mkdir()
    code, err = run_main(capsys, *args)
    assert_user_error(code, err, "is a directory")
    assert "measuring" not in err and "tuples in" not in err


def test_a_missing_folder_fails_before_calibrating(
    capsys: pytest.CaptureFixture[str], work: Path
) -> None:
    code, err = run_main(capsys, "calibrate", "--quick", "--out", work / "no" / "c.json")
    assert_user_error(code, err, "output folder does not exist")
    assert "measuring" not in err


# -- every command: its outputs against every input it reads, and against each other -------


def _profile(path: Path) -> Path:
    """A minimal calibration profile (what 'hycq calibrate --from' refits)."""
    parameters = {"select": 1e-7, "engines": {}}
    doc = {"format": 1, "created": "x", "machine": {}, "fits": {}, "parameters": parameters}
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture
def metrics(
    capsys: pytest.CaptureFixture[str], work: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Real run metrics in ``work/m.json`` (what 'hycq calibrate --from' reads)."""
    monkeypatch.chdir(work)
    code, err = run_main(capsys, *RUN, "--metrics", "m.json")
    assert code == 0, err
    _profile(work / "p.json")
    return work / "m.json"


@pytest.mark.parametrize("how", ["same", "symlink", "hardlink"])
def test_calibrate_refuses_to_write_its_profile_over_the_metrics_it_reads(
    capsys: pytest.CaptureFixture[str], work: Path, metrics: Path, how: str
) -> None:
    before = {p.name: digest(p) for p in work.iterdir() if p.is_file()}
    out = _link(work, how, "m.json", "out.json")
    code, err = run_main(
        capsys, "calibrate", "--from", "m.json", "--profile", "p.json",
        "--out", out,
    )  # fmt: skip
    assert_user_error(code, err, f"--out {out} is the same file as --from m.json")
    assert {p: digest(work / p) for p in before} == before
    no_temporaries(work)


def test_calibrate_reads_each_metrics_file_once(
    capsys: pytest.CaptureFixture[str], work: Path, metrics: Path
) -> None:
    os.link(work / "m.json", work / "m2.json")
    code, err = run_main(
        capsys, "calibrate", "--from", "m.json", "m2.json", "--profile", "p.json", "--out", "o.json"
    )
    assert_user_error(code, err, "--from m.json and m2.json are the same file")
    assert not (work / "o.json").exists()


def test_calibrate_refits_its_profile_in_place(
    capsys: pytest.CaptureFixture[str], work: Path, metrics: Path
) -> None:
    """--out defaults to --profile: naming it explicitly is the same in-place refit."""
    code, err = run_main(
        capsys, "calibrate", "--from", "m.json", "--profile", "p.json", "--out", "p.json"
    )
    assert code == 0, err
    assert json.loads((work / "p.json").read_text())["refit"]["history"]


@pytest.mark.parametrize("which", ["output.partial", "dead_letter.partial"])
def test_a_checkpoint_folder_never_deletes_or_overwrites_an_input(
    capsys: pytest.CaptureFixture[str], work: Path, monkeypatch: pytest.MonkeyPatch, which: str
) -> None:
    monkeypatch.chdir(work)
    (work / "ck").mkdir()
    (work / "ck" / which).write_text(ROWS)
    code, err = run_main(
        capsys, "run", "q.sql", "--data", f"readings=ck/{which}", "--checkpoint", "ck",
        "--output", "o.jsonl",
    )  # fmt: skip
    assert_user_error(code, err, f"ck/{which} is the same file as --data ck/{which}")
    assert (work / "ck" / which).read_text() == ROWS


def test_a_checkpoint_folder_file_is_not_another_output(
    capsys: pytest.CaptureFixture[str], work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(work)
    (work / "ck").mkdir()
    code, err = run_main(
        capsys, *RUN, "--checkpoint", "ck", "--output", "o.jsonl", "--dead-letter",
        "ck/output.partial",
    )  # fmt: skip
    assert_user_error(code, err, "name the same file", "--dead-letter")


@pytest.mark.parametrize("how", ["symlink", "hardlink"])
def test_the_delay_note_of_generated_data_is_not_the_data(
    capsys: pytest.CaptureFixture[str], work: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    monkeypatch.chdir(work)
    (work / "g.csv").write_text("keep me\n")
    _link(work, how, "g.csv", "g.csv.README.md")
    code, err = run_main(
        capsys, "data", "generate", "--out", "g.csv", "--seconds", "2", "--delay", "zipf:3,1"
    )
    assert_user_error(code, err, "name the same file", "g.csv.README.md")
    assert (work / "g.csv").read_text() == "keep me\n"
    no_temporaries(work)


@pytest.mark.parametrize(
    ("generator", "first", "second"),
    [
        ("keyed", "r.csv", "s.csv"),
        ("keyed", "catalog.toml", "t.csv"),
        ("multiway", "query.sql", "r.csv"),
        ("x3", "README.md", "catalog.toml"),
    ],
)
def test_the_files_of_a_generated_folder_are_distinct(
    capsys: pytest.CaptureFixture[str],
    work: Path,
    monkeypatch: pytest.MonkeyPatch,
    generator: str,
    first: str,
    second: str,
) -> None:
    monkeypatch.chdir(work)
    (work / "out").mkdir()
    (work / "out" / second).write_text("keep me\n")
    (work / "out" / first).symlink_to(work / "out" / second)
    code, err = run_main(
        capsys, "data", "generate", "--generator", generator, "--out", "out", "--seconds", "2"
    )
    assert_user_error(code, err, "name the same file", first, second)
    assert (work / "out" / second).read_text() == "keep me\n"
    no_temporaries(work)


def test_bench_outputs_are_distinct(
    capsys: pytest.CaptureFixture[str], work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(work)
    code, err = run_main(capsys, "bench", "q.sql", "--rates", "100", "--json", "b.png",
                         "--plot", "b.png")  # fmt: skip
    assert_user_error(code, err, "--json and --plot name the same file")
    assert "measuring" not in err
