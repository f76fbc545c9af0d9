"""Data that used to give silent, surprising or internal-error results.

* Every row rejected: exit 2 (the dead letters are still written); more than half rejected:
  a warning line.
* JSON lines (results and dead letters) are strict JSON: NaN and infinities are null.
* CSV headers are told by content, not quoting: ``"1","1377986401",...`` is data.
* ``--duration`` shorter than a tick still covers the first tick; a huge one is the file.
* A FIFO (or ``/dev/stdin``) as ``--data`` is read as a stream, and a stop request ends the
  wait for its data; ``/dev/null`` is an empty file (exit 2).
* A bad line costs that line only, in a file, on stdin or a FIFO: an unterminated quote, a
  line over the 1 MiB limit (found in linear time; a stop ends its read at once).
* A data file or stream without rows (a header only, a 0-row Parquet file) is exit 2.
* Timestamps near the INT64 limits are dead-lettered (exit 2 when nothing else is left); a
  ``--rate`` that would push replayed timestamps out of range is refused.
* The metrics' ``rate`` of a file replayed as it is is its real density.
* A catalog stream the generator cannot produce is refused when the catalog is loaded.
* The generator's memory is bounded at any ``--rate`` (1e9, 1e10).
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from hycq.cli import main
from tests.datagen import SCHEMA

ROOT = Path(__file__).resolve().parents[2]
Q1 = ROOT / "queries" / "smartplug" / "q1.sql"
Q5 = ROOT / "queries" / "smartplug" / "q5.sql"
CATALOG = ROOT / "queries" / "smartplug" / "catalog.toml"
COUNT = "SELECT COUNT(*) AS n, SUM(value) AS s FROM readings [RANGE 2 SECONDS SLIDE 1 SECOND]\n"


def run_main(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    try:
        code = main([str(a) for a in args])
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def assert_one_error(code: int, err: str, *parts: str) -> None:
    assert code == 2, (code, err)
    assert err.count("error: ") == 1 and "internal error" not in err, err
    assert "Traceback" not in err, err
    for part in parts:
        assert part in err, (part, err)


def rows(n: int, start: int = 1377986401, per_second: int = 2) -> list[str]:
    return [f"{i},{start + i // per_second},{i * 1.5},1,{i % 3},0,0" for i in range(n)]


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "count.sql").write_text(COUNT)
    (tmp_path / "catalog.toml").write_text(CATALOG.read_text())
    return tmp_path


# -- rejected rows ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lines", "reason"),
    [
        ([f"{i},{1377986401 + i}.5,1.0,1,0,0,0" for i in range(20)], "'1377986401.5'"),
        ([line + ",9" for line in rows(20)], "expected 7 fields, found 8"),
        ([line.replace(",1,", ",x,", 1) for line in rows(20)], "column 'property'"),
        ([line.rsplit(",", 1)[0] + "," for line in rows(20)], "missing value"),
        ([f"{i},{1377986401 + i},nan,1,0,0,0" for i in range(20)], "non-finite"),
    ],
    ids=["float ts", "8 fields", "text", "empty cell", "nan"],
)
def test_a_file_with_no_valid_row_is_an_error(
    capsys: pytest.CaptureFixture[str], work: Path, lines: list[str], reason: str
) -> None:
    (work / "bad.csv").write_text("\n".join(lines) + "\n")
    code, _, err = run_main(
        capsys, "run", "count.sql", "--data", "readings=bad.csv", "--output", "o.csv",
        "--dead-letter", "dl.jsonl",
    )  # fmt: skip
    assert_one_error(code, err, "no valid row in file bad.csv: all 20 rows were rejected", reason)
    assert not (work / "o.csv").exists()
    letters = (work / "dl.jsonl").read_text().splitlines()
    assert len(letters) == 20  # the reasons are kept
    assert not list(work.glob(".*.tmp"))


def test_a_parquet_file_with_no_valid_row_is_an_error(
    capsys: pytest.CaptureFixture[str], work: Path
) -> None:
    table = pa.table(
        {
            "id": [1, 2, 3],
            "ts": [1377986401, 1377986402, 1377986403],
            "value": [float("nan"), float("inf"), None],
            "property": [1, 1, 1],
            "plug_id": [0, 0, 0],
            "household_id": [0, 0, 0],
            "house_id": [0, 0, 0],
        }
    )
    pq.write_table(table, work / "bad.parquet")
    code, _, err = run_main(
        capsys, "run", "count.sql", "--data", "readings=bad.parquet", "--dead-letter", "dl.jsonl"
    )
    assert_one_error(code, err, "all 3 rows were rejected")
    for line in (work / "dl.jsonl").read_text().splitlines():  # strict JSON: null, not NaN
        json.loads(line, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))


@pytest.mark.parametrize(("bad", "warned"), [(6, True), (4, False), (0, False)])
def test_more_than_half_rejected_is_a_warning(
    capsys: pytest.CaptureFixture[str], work: Path, bad: int, warned: bool
) -> None:
    good = rows(10 - bad)
    broken = [f"{i},{1377986401 + i}.5,1.0,1,0,0,0" for i in range(bad)]
    (work / "d.csv").write_text("\n".join(good + broken) + "\n")
    code, _, err = run_main(capsys, "run", "count.sql", "--data", "readings=d.csv")
    assert code == 0, err
    assert ("warning: " in err) == warned, err
    if warned:
        assert f"{bad} of 10 input rows were dead-lettered" in err


# -- strict JSON ----------------------------------------------------------------------------

NON_FINITE = (
    "SELECT value / 0.0 AS inf, -value / 0.0 AS minus, (value - value) / 0.0 AS nan, value "
    "FROM readings [NOW]\n"
)


@pytest.mark.parametrize("placement", ["row", "column"])
@pytest.mark.parametrize("output", ["o.jsonl", "-"])
def test_json_lines_write_null_for_nan_and_infinity(
    capsys: pytest.CaptureFixture[str], work: Path, placement: str, output: str
) -> None:
    (work / "nf.sql").write_text(NON_FINITE)
    (work / "d.csv").write_text("\n".join(rows(6)) + "\n")
    code, out, err = run_main(
        capsys, "run", "nf.sql", "--data", "readings=d.csv", "--placement", placement,
        "--output", output,
    )  # fmt: skip
    assert code == 0, err
    text = out if output == "-" else (work / output).read_text()
    got = [
        json.loads(line, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
        for line in text.splitlines()
    ]
    assert len(got) == 6
    for r in got:
        if r["value"] > 0:
            assert r["inf"] is None and r["minus"] is None and r["nan"] is None
        assert set(r) == {"inf", "minus", "nan", "value", "_ts"}


# -- headers by content -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "header"),
    [
        ('"1","1377986401","2.5","1","0","0","0"\n"2","1377986402","3.5","1","0","0","0"\n', False),
        ('1,"1377986401",2.5,1,0,0,0\n2,1377986402,"3.5",1,0,0,0\n', False),
        (' 1 , 1377986401 ,2.5,1,0,0,0\n2,1377986402,3.5,1,0,0,0\n', False),
        ('"id","ts","value","property","plug_id","household_id","house_id"\n'
         '"1","1377986401","2.5","1","0","0","0"\n"2","1377986402","3.5","1","0","0","0"\n', True),
        ("house_id,household_id,plug_id,property,value,timestamp,id\n"
         "0,0,0,1,2.5,1377986401,1\n0,0,0,1,3.5,1377986402,2\n", True),
    ],
    ids=["all quoted", "some quoted", "spaces", "quoted header", "reordered header"],
)  # fmt: skip
def test_headers_are_told_by_content_not_quoting(
    capsys: pytest.CaptureFixture[str], work: Path, text: str, header: bool
) -> None:
    from engines.sources.files import detect_format

    (work / "d.csv").write_text(text)
    assert detect_format(work / "d.csv") == ("csv" if header else "debs")
    code, out, err = run_main(
        capsys, "run", "count.sql", "--data", "readings=d.csv", "--output", "-"
    )
    assert code == 0, err
    got = [json.loads(line) for line in out.splitlines()]
    assert [(r["n"], r["s"], r["_ts"]) for r in got[:2]] == [
        (1, 2.5, 1377986401),
        (2, 6.0, 1377986402),
    ]


# -- --duration ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("duration", "instants"),
    [("1e-9", 1), ("0.5", 1), ("1", 1), ("1.000001", 2), ("3", 3), ("1e9", 5)],
)
def test_a_duration_shorter_than_a_tick_covers_the_first_tick(
    capsys: pytest.CaptureFixture[str], work: Path, duration: str, instants: int
) -> None:
    (work / "d.csv").write_text("\n".join(rows(10)) + "\n")  # ts 401 .. 405
    code, out, err = run_main(
        capsys, "run", "count.sql", "--data", "readings=d.csv", "--duration", duration,
        "--output", "-",
    )  # fmt: skip
    assert code == 0, err
    got = [json.loads(line) for line in out.splitlines()]
    first = [r for r in got if r["_ts"] < 1377986401 + min(instants, 5)]
    assert sum(r["n"] for r in first[:1]) == 2  # the first second's two readings
    assert max(r["_ts"] for r in got) >= 1377986401 + instants - 1


# -- pipes and devices ------------------------------------------------------------------------


def _cli(*args: str | Path, cwd: Path, **kw: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "hycq.cli", *map(str, args)],
        cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw,  # type: ignore[call-overload]
    )  # fmt: skip


def test_a_fifo_is_read_as_a_stream(work: Path) -> None:
    text = "\n".join(rows(40)) + "\n"
    (work / "d.csv").write_text(text)
    os.mkfifo(work / "pipe.csv")

    def feed() -> None:
        with open(work / "pipe.csv", "w") as fh:
            for line in text.splitlines(keepends=True):
                fh.write(line)
                fh.flush()

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    proc = _cli("run", "count.sql", "--data", "readings=pipe.csv", "--output", "p.jsonl", cwd=work)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    done = subprocess.run(
        [sys.executable, "-m", "hycq.cli", "run", "count.sql", "--data", "readings=d.csv",
         "--output", "f.jsonl"],
        cwd=work, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (work / "p.jsonl").read_text() == (work / "f.jsonl").read_text()


@pytest.mark.parametrize("header", [False, True])
def test_a_pipe_fed_in_bursts_reports_bad_rows_with_their_lines(work: Path, header: bool) -> None:
    lines = rows(30)
    lines[3] = "3,1377986402,x,1,0,0,0"
    lines[17] += ",9"
    lines[25] = ""  # a blank line: skipped, not counted
    if header:
        lines.insert(0, "id,ts,value,property,plug_id,household_id,house_id")
    text = "\n".join(lines) + "\n"
    (work / "d.csv").write_text(text)
    os.mkfifo(work / "p.csv")

    def feed() -> None:
        with open(work / "p.csv", "w") as fh:
            for part in (text[:150], text[150:400], text[400:]):  # cut inside lines too
                fh.write(part)
                fh.flush()
                time.sleep(0.4)

    threading.Thread(target=feed, daemon=True).start()
    letters = {}
    for name in ("p.csv", "d.csv"):
        done = subprocess.run(
            [sys.executable, "-m", "hycq.cli", "run", "count.sql", "--data", f"readings={name}",
             "--dead-letter", f"{name}.jsonl", "--output", f"{name}.out.jsonl"],
            cwd=work, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        letters[name] = [
            json.loads(line)["reason"].replace(name, "FILE")
            for line in (work / f"{name}.jsonl").read_text().splitlines()
        ]
    assert letters["p.csv"] == letters["d.csv"] and len(letters["d.csv"]) == 2
    assert (work / "p.csv.out.jsonl").read_text() == (work / "d.csv.out.jsonl").read_text()


def test_stdin_as_a_data_path(work: Path) -> None:
    text = "\n".join(rows(40)) + "\n"
    done = subprocess.run(
        [sys.executable, "-m", "hycq.cli", "run", "count.sql", "--data", "readings=/dev/stdin",
         "--output", "-"],
        cwd=work, input=text, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 20  # instants 401 .. 420


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_ends_the_wait_for_a_pipe(work: Path, sig: signal.Signals) -> None:
    """A writer that sends some rows and then stalls: the run waits for more, and a signal
    stops it with the results so far."""
    os.mkfifo(work / "pipe.csv")
    stalled = threading.Event()

    def feed() -> None:
        with open(work / "pipe.csv", "w") as fh:
            fh.write("\n".join(rows(20)) + "\n")
            fh.flush()
            stalled.wait(60)

    threading.Thread(target=feed, daemon=True).start()
    proc = _cli(
        "run", "count.sql", "--data", "readings=pipe.csv", "--output", "o.csv", "--metrics",
        "m.json", cwd=work,
    )  # fmt: skip
    try:
        time.sleep(4)
        assert proc.poll() is None
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        stalled.set()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + sig.value, err
    assert json.loads((work / "m.json").read_text())["tuples_in"] == 20
    assert pacsv.read_csv(work / "o.csv").num_rows > 0
    assert not list(work.glob(".*.tmp"))


@pytest.mark.parametrize(
    ("path", "part"),
    [
        ("/dev/null", "the file is empty"),
        ("/dev/zero", "not a text (CSV) file"),
    ],
)
def test_devices_as_data(
    capsys: pytest.CaptureFixture[str], work: Path, path: str, part: str
) -> None:
    code, _, err = run_main(capsys, "run", "count.sql", "--data", f"readings={path}")
    assert_one_error(code, err, part)


def test_parquet_through_a_pipe_is_refused(work: Path) -> None:
    pq.write_table(pa.table({"x": [1]}), work / "p.parquet")
    done = subprocess.run(
        [sys.executable, "-m", "hycq.cli", "run", "count.sql", "--data", "readings=/dev/stdin"],
        cwd=work, input=(work / "p.parquet").read_bytes(), capture_output=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert b"Parquet cannot be read from a pipe" in done.stderr


# -- a bad line costs that line: unterminated quotes, lines over the limit -----------------------

#: The issue's file: 20,000 rows, an unterminated quote opened mid-file on line 51.
QUOTE_AT = 51


def _quoted(n: int = 20000, header: bool = False) -> str:
    lines = rows(n)
    lines[QUOTE_AT - 1] = lines[QUOTE_AT - 1].replace(",", ',"', 1)  # '50,"1377...' never closed
    top = "id,ts,value,property,plug_id,household_id,house_id\n" if header else ""
    return top + "\n".join(lines) + "\n"


def _letters(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _feed_fifo(path: Path, data: bytes, pieces: int = 1) -> threading.Thread:
    """Write ``data`` into the FIFO ``path`` (created here) from a thread, in ``pieces``."""
    os.mkfifo(path)

    def feed() -> None:
        with contextlib.suppress(BrokenPipeError), open(path, "wb") as fh:
            step = -(-len(data) // pieces)
            for at in range(0, len(data), step):
                fh.write(data[at : at + step])
                fh.flush()

    thread = threading.Thread(target=feed, daemon=True)
    thread.start()
    return thread


def _run_streamed(
    work: Path, via: str, data: bytes, *args: str
) -> subprocess.CompletedProcess[str]:
    """``hycq run count.sql`` reading ``data`` from stdin or a FIFO (a subprocess)."""
    if via == "fifo":
        _feed_fifo(work / "p.csv", data, pieces=7)
        source, given = "readings=p.csv", None
    else:
        source, given = "readings=-", data  # bytes as they are: not every line is UTF-8
    done = subprocess.run(
        [sys.executable, "-m", "hycq.cli", "run", "count.sql", "--data", source, *args],
        cwd=work, input=given, capture_output=True, timeout=120,
    )  # fmt: skip
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(errors="replace"),
        done.stderr.decode(errors="replace"),
    )  # fmt: skip


@pytest.mark.parametrize("header", [False, True], ids=["debs", "csv"])
def test_an_unterminated_quote_costs_only_its_line(
    capsys: pytest.CaptureFixture[str], work: Path, header: bool
) -> None:
    (work / "q.csv").write_text(_quoted(header=header))
    code, _, err = run_main(
        capsys, "run", "count.sql", "--data", "readings=q.csv", "--metrics", "m.json",
        "--dead-letter", "dl.jsonl",
    )  # fmt: skip
    assert code == 0, err
    assert json.loads((work / "m.json").read_text())["tuples_in"] == 19999  # was 50
    (letter,) = _letters(work / "dl.jsonl")
    line = QUOTE_AT + header
    assert str(letter["reason"]).startswith(f"q.csv line {line}: unterminated quote"), letter


@pytest.mark.parametrize("via", ["stdin", "fifo"])
def test_an_unterminated_quote_in_a_stream_costs_only_its_line(work: Path, via: str) -> None:
    data = _quoted(4000).encode()
    done = _run_streamed(work, via, data, "--metrics", "m.json", "--dead-letter", "dl.jsonl")
    assert done.returncode == 0, done.stderr
    assert json.loads((work / "m.json").read_text())["tuples_in"] == 3999
    (letter,) = _letters(work / "dl.jsonl")
    assert f"line {QUOTE_AT}: unterminated quote" in str(letter["reason"]), letter


#: Lines that are not UTF-8 (pyarrow decodes a bad row's text for its handler, and failed
#: there: the read stopped with an "Exception ignored" traceback), of the right width or not.
UNDECODABLE = [b"\xff\xfe\x80,A", b"5,1377986420,\xff\xfe,1,1,0,0", b"\xc3(" + b",1" * 6]


@pytest.mark.parametrize("line", UNDECODABLE, ids=["short", "width", "truncated"])
def test_a_line_that_is_not_utf8_is_a_dead_letter(
    capsys: pytest.CaptureFixture[str], work: Path, line: bytes
) -> None:
    lines = [r.encode() for r in rows(40)]
    lines.insert(10, line)
    (work / "bin.csv").write_bytes(b"\n".join(lines) + b"\n")
    code, _, err = run_main(
        capsys, "run", "count.sql", "--data", "readings=bin.csv", "--metrics", "m.json",
        "--dead-letter", "dl.jsonl",
    )  # fmt: skip
    assert code == 0, err
    assert "Traceback" not in err and "Exception ignored" not in err
    assert json.loads((work / "m.json").read_text())["tuples_in"] == 40
    (letter,) = _letters(work / "dl.jsonl")
    assert str(letter["reason"]) == "bin.csv line 11: not UTF-8 text", letter


@pytest.mark.parametrize("via", ["stdin", "fifo"])
def test_a_line_that_is_not_utf8_in_a_stream_is_a_dead_letter(work: Path, via: str) -> None:
    lines = [r.encode() for r in rows(40)]
    lines.insert(10, UNDECODABLE[0])
    done = _run_streamed(
        work, via, b"\n".join(lines) + b"\n", "--metrics", "m.json", "--dead-letter", "dl.jsonl"
    )
    assert done.returncode == 0, done.stderr
    assert "Exception ignored" not in done.stderr
    assert json.loads((work / "m.json").read_text())["tuples_in"] == 40
    (letter,) = _letters(work / "dl.jsonl")
    assert "line 11: not UTF-8 text" in str(letter["reason"]), letter


def test_a_line_over_the_limit_is_a_dead_letter(
    capsys: pytest.CaptureFixture[str], work: Path
) -> None:
    lines = rows(40)
    lines[9] += "9" * (20 << 20)  # 20 MB: was pyarrow's "straddling object" error
    (work / "long.csv").write_text("\n".join(lines) + "\n")
    code, _, err = run_main(
        capsys, "run", "count.sql", "--data", "readings=long.csv", "--metrics", "m.json",
        "--dead-letter", "dl.jsonl",
    )  # fmt: skip
    assert code == 0, err
    assert json.loads((work / "m.json").read_text())["tuples_in"] == 39
    (letter,) = _letters(work / "dl.jsonl")
    assert str(letter["reason"]).startswith("long.csv line 10: line longer than the limit")
    assert len(str(letter["row"])) < 2000  # the start of the line only


@pytest.mark.parametrize("via", ["stdin", "fifo"])
def test_a_long_line_in_a_stream_is_a_dead_letter_in_bounded_time(work: Path, via: str) -> None:
    lines = rows(40)
    lines[9] += "9" * (30 << 20)  # 30 MB: spun at full CPU for minutes
    start = time.monotonic()
    done = _run_streamed(
        work, via, ("\n".join(lines) + "\n").encode(), "--metrics", "m.json",
        "--dead-letter", "dl.jsonl",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - start < 60
    assert json.loads((work / "m.json").read_text())["tuples_in"] == 39
    (letter,) = _letters(work / "dl.jsonl")
    assert "line 10: line longer than the limit" in str(letter["reason"]), letter


@pytest.mark.parametrize("via", ["stdin", "fifo"])
def test_a_stop_ends_the_read_of_a_long_line_at_once(work: Path, via: str) -> None:
    """A writer that sends rows, then a line that never ends: SIGTERM stops the run at once
    with the results so far (it ignored SIGTERM for over a minute)."""
    stop = threading.Event()
    sent_mb = [0]  # MiB of the endless line written: the pipe is full until the run reads
    fifo = work / "p.csv"
    if via == "fifo":
        os.mkfifo(fifo)
    proc = _cli(
        "run", "count.sql", "--data", "readings=" + ("p.csv" if via == "fifo" else "-"),
        "--metrics", "m.json", cwd=work, stdin=subprocess.PIPE if via == "stdin" else None,
    )  # fmt: skip

    def feed() -> None:
        with contextlib.suppress(OSError, ValueError):
            fh = open(fifo, "w") if via == "fifo" else proc.stdin  # noqa: SIM115
            assert fh is not None
            with fh:
                fh.write("\n".join(rows(20)) + "\n42,1377986420,")
                while not stop.is_set():
                    fh.write("7" * (1 << 20))
                    sent_mb[0] += 1

    threading.Thread(target=feed, daemon=True).start()
    try:
        deadline = time.monotonic() + 90
        while sent_mb[0] < 8 and time.monotonic() < deadline:  # the run loop reads it
            time.sleep(0.1)
        assert proc.poll() is None and sent_mb[0] >= 8
        proc.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        _, err = proc.communicate(timeout=30)
        assert time.monotonic() - sent < 10, err
    finally:
        stop.set()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM.value, err
    assert json.loads((work / "m.json").read_text())["tuples_in"] == 20


# -- inputs without rows -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("h.csv", "id,ts,value,property,plug_id,household_id,house_id\n"),
        ("hb.csv", "id,ts,value,property,plug_id,household_id,house_id\r\n\r\n\n\n"),
        ("p.parquet", None),
    ],
    ids=["header only", "header and blank lines", "0-row parquet"],
)
def test_an_input_without_rows_is_an_error(
    capsys: pytest.CaptureFixture[str], work: Path, name: str, content: str | None
) -> None:
    if content is None:
        pq.write_table(SCHEMA.empty_table(), work / name)
    else:
        (work / name).write_text(content)
    code, _, err = run_main(
        capsys, "run", "count.sql", "--data", f"readings={name}", "--output", "o.csv"
    )
    assert_one_error(code, err, f"{name} has no rows", "hint:")
    assert "tuples in" not in err and not (work / "o.csv").exists()


@pytest.mark.parametrize("via", ["stdin", "fifo"])
def test_a_stream_without_rows_is_an_error(work: Path, via: str) -> None:
    data = b"id,ts,value,property,plug_id,household_id,house_id\n\n"
    done = _run_streamed(work, via, data, "--output", "o.csv")
    assert_one_error(done.returncode, done.stderr, "has no rows", "hint:")
    assert not (work / "o.csv").exists()


def test_a_catalog_file_without_rows_is_an_error(
    capsys: pytest.CaptureFixture[str], work: Path
) -> None:
    (work / "h.csv").write_text("id,ts,value,property,plug_id,household_id,house_id\n")
    text = CATALOG.read_text()
    start = text.index("[streams.readings.source]")
    (work / "catalog.toml").write_text(
        text[:start] + '[streams.readings.source]\nkind = "file"\npath = "h.csv"\n'
    )
    code, _, err = run_main(capsys, "run", "count.sql")
    assert_one_error(code, err, "h.csv has no rows")


# -- timestamps at the limits -----------------------------------------------------------------


@pytest.mark.parametrize(
    "far",
    [9223372036854775807, 9223372036854775806, -9223372036854775808, 2**62 + 1, -(2**62) - 1],
)
@pytest.mark.parametrize("placement", ["row", "column"])
def test_timestamps_near_the_int64_limits_are_dead_lettered(
    capsys: pytest.CaptureFixture[str], work: Path, far: int, placement: str
) -> None:
    (work / "d.csv").write_text("\n".join(rows(6)) + f"\n99,{far},1.0,1,0,0,0\n")
    code, out, err = run_main(
        capsys, "run", "count.sql", "--data", "readings=d.csv", "--placement", placement,
        "--dead-letter", "dl.jsonl", "--output", "-",
    )  # fmt: skip
    assert code == 0, err
    assert len(out.splitlines()) == 3  # instants 401 .. 403 from the valid rows
    (letter,) = [json.loads(line) for line in (work / "dl.jsonl").read_text().splitlines()]
    assert "out of range" in letter["reason"] and str(far) in letter["reason"]
    (work / "far.csv").write_text(f"1,{far},1.0,1,0,0,0\n")
    code, _, err = run_main(capsys, "run", "count.sql", "--data", "readings=far.csv")
    assert_one_error(code, err, "no valid row", "out of range")


def test_timestamps_at_the_limits_in_parquet(
    capsys: pytest.CaptureFixture[str], work: Path
) -> None:
    ts = [1377986401, 1377986402, 2**63 - 1, -(2**63)]
    table = pa.table(
        {"id": [1, 2, 3, 4], "ts": ts, "value": [1.0] * 4, "property": [1] * 4,
         "plug_id": [0] * 4, "household_id": [0] * 4, "house_id": [0] * 4},
        schema=SCHEMA,
    )  # fmt: skip
    pq.write_table(table, work / "d.parquet")
    code, _, err = run_main(capsys, "run", "count.sql", "--data", "readings=d.parquet")
    assert code == 0 and "2 rows dead-lettered" in err, err


@pytest.mark.parametrize("rate", ["1e-300", "1e-18"])
def test_a_rate_that_spreads_timestamps_out_of_range_is_refused(
    capsys: pytest.CaptureFixture[str], work: Path, rate: str
) -> None:
    (work / "d.csv").write_text("\n".join(rows(40)) + "\n")
    code, _, err = run_main(capsys, "run", "count.sql", "--data", "readings=d.csv", "--rate", rate)
    assert_one_error(code, err, f"--rate {float(rate):g} spreads the data beyond")


def test_a_generator_start_near_the_limit_is_refused(
    capsys: pytest.CaptureFixture[str], work: Path
) -> None:
    text = CATALOG.read_text().replace("seed = 42", f"seed = 42\nstart = {2**62 - 5}")
    (work / "catalog.toml").write_text(text)
    code, _, err = run_main(capsys, "run", "count.sql", "--duration", "10")
    assert_one_error(code, err, "passes the largest timestamp")


# -- metrics rate ----------------------------------------------------------------------------


@pytest.mark.parametrize(("per_second", "rate_arg", "expected"), [(4, None, 4.0), (2, "50", 50.0)])
def test_metrics_rate_is_the_data_density(
    capsys: pytest.CaptureFixture[str],
    work: Path,
    per_second: int,
    rate_arg: str | None,
    expected: float,
) -> None:
    (work / "d.csv").write_text("\n".join(rows(40, per_second=per_second)) + "\n")
    extra = ("--rate", rate_arg) if rate_arg else ()
    code, _, err = run_main(
        capsys, "run", "count.sql", "--data", "readings=d.csv", "--metrics", "m.json", *extra
    )
    assert code == 0, err
    m = json.loads((work / "m.json").read_text())
    assert m["rate"] == pytest.approx(expected)


def test_metrics_rate_of_the_generator(capsys: pytest.CaptureFixture[str], work: Path) -> None:
    code, _, err = run_main(
        capsys, "run", "count.sql", "--duration", "2", "--rate", "300", "--metrics", "m.json"
    )
    assert code == 0, err
    assert json.loads((work / "m.json").read_text())["rate"] == 300


# -- catalogs the generator cannot serve --------------------------------------------------------


@pytest.mark.parametrize(
    ("edit", "part"),
    [
        (('house_id = "INTEGER"', 'house_id = "INTEGER"\nroom = "INTEGER"'),
         "the smartplug generator does not produce a column 'room'"),
        (('plug_id = "INTEGER"', 'plug_id = "BIGINT"'),
         "plug_id is BIGINT, but the smartplug generator produces it as INTEGER"),
        (('timestamp = "ts"', 'timestamp = "id"'), "event time is column 'ts' in seconds"),
        (('time_unit = "s"', 'time_unit = "ms"'), "event time is column 'ts' in seconds"),
    ],
    ids=["extra column", "wrong type", "other time column", "milliseconds"],
)  # fmt: skip
@pytest.mark.parametrize("command", ["explain", "run", "run --data"])
def test_a_catalog_the_generator_cannot_serve_is_refused_at_load(
    capsys: pytest.CaptureFixture[str],
    work: Path,
    edit: tuple[str, str],
    part: str,
    command: str,
) -> None:
    (work / "catalog.toml").write_text(CATALOG.read_text().replace(*edit))
    (work / "d.csv").write_text("\n".join(rows(10)) + "\n")
    extra = {"run": ("--duration", "2"), "run --data": ("--data", "readings=d.csv")}
    code, _, err = run_main(capsys, command.split()[0], "count.sql", *extra.get(command, ()))
    assert_one_error(code, err, "catalog.toml", part)


def test_a_subset_of_the_generated_columns_runs(
    capsys: pytest.CaptureFixture[str], work: Path
) -> None:
    text = CATALOG.read_text()
    for col in ("household_id", "house_id", "property"):
        text = text.replace(f'{col} = "INTEGER"\n', "")
    (work / "catalog.toml").write_text(text)
    # On the row engine: its sums do not depend on thread scheduling (DuckDB's parallel
    # SUM of doubles may round differently from run to run, within docs/semantics.md's bound)
    args = ("run", "count.sql", "--duration", "3", "--placement", "row", "--output", "-")
    code, out, err = run_main(capsys, *args)
    assert code == 0, err
    (work / "catalog.toml").write_text(CATALOG.read_text())
    code, full, err = run_main(capsys, *args)
    assert code == 0, err
    assert out == full and out  # the same stream: the columns read are the same values


def test_the_catalog_check_agrees_with_the_generator() -> None:
    from engines.arrow_types import arrow_schema
    from engines.sources.smartplug import SCHEMA as GENERATED
    from optimizer.ir.schema import Field, Schema
    from optimizer.sql.catalog import GENERATOR_COLUMNS

    declared = GENERATOR_COLUMNS["smartplug"]
    schema = arrow_schema(Schema(tuple(Field(n, t) for n, t in declared.items())))
    assert schema.equals(GENERATED)


# -- the generator at any rate ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rate", "seconds", "expected"), [("1e9", "1e-5", 10_000), ("1e10", "1e-5", 100_000)]
)
def test_huge_rates_run_with_bounded_memory(
    capsys: pytest.CaptureFixture[str], work: Path, rate: str, seconds: str, expected: int
) -> None:
    code, _, err = run_main(
        capsys, "run", "count.sql", "--rate", rate, "--duration", seconds, "--metrics", "m.json"
    )
    assert code == 0, err
    assert json.loads((work / "m.json").read_text())["tuples_in"] == expected
    code, _, err = run_main(
        capsys, "data", "generate", "--out", "g.parquet", "--rate", rate, "--seconds", seconds
    )
    assert code == 0 and pq.read_metadata(work / "g.parquet").num_rows == expected, err


def test_generating_at_a_huge_rate_stays_within_memory_and_stops(work: Path) -> None:
    """Memory capped at 3 GB: the old generator was OOM-killed at --rate 1e9 (and raised
    MemoryError at 1e10); now it streams bounded batches until it is stopped. (10^9 rows:
    at least 16 GB of CSV; a generation the disk cannot hold is refused up front, see
    test_hostile_options.py.)"""
    import shutil

    if shutil.disk_usage(work).free < 20e9:
        pytest.skip("less than 20 GB free: the generation would be refused up front")

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    args = ("data", "generate", "--out", "g.csv", "--rate", "1e10", "--seconds", "0.1")
    proc = _cli(*args, cwd=work, preexec_fn=cap)
    try:
        time.sleep(6)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    assert "MemoryError" not in err and "internal error" not in err, err
    assert not list(work.glob(".*.tmp")) and not (work / "g.csv").exists()


def test_a_run_whose_windows_outgrow_memory_stops_with_an_error(
    capsys: pytest.CaptureFixture[str], work: Path
) -> None:
    """At 1e10 tuples per event-second one second of the window is 1e10 tuples: the run
    stops at its memory limit with exit 2, not by the OOM killer or a MemoryError."""
    from engines.runtime.resources import rss_mb

    limit = rss_mb() + 400
    start = time.monotonic()
    code, _, err = run_main(
        capsys, "run", "count.sql", "--rate", "1e10", "--duration", "60", "--output", "o.csv",
        "--placement", "row", "--memory-limit", f"{limit:.0f}",
    )  # fmt: skip
    assert_one_error(code, err, "out of memory", "--memory-limit")
    assert time.monotonic() - start < 120
    assert not (work / "o.csv").exists() and not list(work.glob(".*.tmp"))
