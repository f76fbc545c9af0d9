"""engines.output_files: the rules every hycq output follows, case by case (the CLI's use of
them is tests/e2e/test_output_safety.py)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from engines.output_files import (
    OutputFile,
    check_distinct,
    check_writable,
    remove_temporaries,
    write_bytes,
)
from optimizer.ir.errors import OutputError


def test_a_dangling_symlink_gets_its_target_created(tmp_path: Path) -> None:
    (tmp_path / "link.txt").symlink_to(tmp_path / "real.txt")
    write_bytes(tmp_path / "link.txt", "x", "--out")
    assert (tmp_path / "real.txt").read_text() == "x" and (tmp_path / "link.txt").is_symlink()


def test_a_symlink_to_a_missing_folder_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "link.txt").symlink_to(tmp_path / "no" / "real.txt")
    with pytest.raises(OutputError, match="output folder does not exist"):
        check_writable(tmp_path / "link.txt", "--out")
    with pytest.raises(OutputError, match="cannot write"):
        write_bytes(tmp_path / "link.txt", "x", "--out")


def test_a_chain_of_symlinks_keeps_every_link(tmp_path: Path) -> None:
    (tmp_path / "real.txt").write_text("old")
    (tmp_path / "b.txt").symlink_to(tmp_path / "real.txt")
    (tmp_path / "a.txt").symlink_to(tmp_path / "b.txt")
    write_bytes(tmp_path / "a.txt", "new", "--out")
    assert (tmp_path / "a.txt").is_symlink() and (tmp_path / "b.txt").is_symlink()
    assert (tmp_path / "real.txt").read_text() == "new"


def test_an_aborted_file_leaves_nothing_and_the_old_file_intact(tmp_path: Path) -> None:
    (tmp_path / "o.txt").write_text("old")
    with pytest.raises(RuntimeError), OutputFile(tmp_path / "o.txt", "--out") as out:
        out.file("w").write("half")
        raise RuntimeError("stop")
    assert (tmp_path / "o.txt").read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["o.txt"]


def test_remove_temporaries_removes_what_was_not_committed(tmp_path: Path) -> None:
    out = OutputFile(tmp_path / "o.txt", "--out")
    fh = out.file("w")
    fh.write("x")
    assert out.tmp is not None and out.tmp.exists()
    remove_temporaries()
    assert list(tmp_path.iterdir()) == []
    fh.close()  # the process would exit; here the test closes what it opened


@pytest.mark.parametrize(
    ("a", "b"),
    [("o.csv", "./o.csv"), ("o.csv", "sub/../o.csv"), ("sub/o.csv", "lnk/o.csv")],
)
def test_the_same_new_file_named_two_ways(tmp_path: Path, a: str, b: str) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "lnk").symlink_to(tmp_path / "sub")
    with pytest.raises(OutputError, match="name the same file"):
        check_distinct([], [("--output", tmp_path / a), ("--metrics", tmp_path / b)])


def test_character_devices_are_never_the_same_file(tmp_path: Path) -> None:
    check_distinct(
        [("--data", "/dev/stdin")], [("--output", "/dev/null"), ("--metrics", "/dev/null")]
    )


def test_a_fifo_may_not_be_input_and_output(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "p")
    with pytest.raises(OutputError, match="same file"):
        check_distinct([("--data", tmp_path / "p")], [("--output", tmp_path / "p")])


def test_the_mode_of_a_new_file_follows_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        write_bytes(tmp_path / "o.txt", "x", "--out")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "o.txt").st_mode) == 0o600
    old = os.umask(0)
    try:
        write_bytes(tmp_path / "p.txt", "x", "--out")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "p.txt").st_mode) == 0o666
