"""Files written at paths the user names: never an input, never torn, never left half-done.

Every file hycq writes where the user said (``run --output/--metrics/--dead-letter/--report``
and the ``--checkpoint`` folder's partial files, ``report --out``, ``bench --json/--plot``,
``calibrate --out``, ``data generate --out`` and every file it writes into a folder) goes
through this module:

* :func:`check_distinct` refuses an output that is the same file as an input or as another
  output: the same ``(st_dev, st_ino)`` once symlinks are followed (so a hard link counts
  too), or, for a file that does not exist yet, the same resolved path. Character devices
  (``/dev/null``, a terminal) are never "the same file": writing there loses nothing.
* :func:`check_read_once` refuses one input file given twice to an option that adds up
  what it reads (``calibrate --from``).
* :func:`check_writable` checks, before any long work, that a file can be created where the
  output goes (the folder exists and takes a new file: read-only folders and file systems are
  found here, not after minutes of measuring).
* :class:`OutputFile` writes one output. A regular file (or a new path) is written to a
  temporary ``.NAME.XXXX.tmp`` beside the *resolved* target and renamed over it on
  :meth:`~OutputFile.commit`, so readers never see half a file and a symlink stays a symlink
  (its target is replaced). The file gets the mode of the file it replaces, else
  ``0666 & ~umask``. A FIFO or a character device (``/dev/stdout``, a named pipe) is written
  in place: nothing is renamed over it. Other kinds (directories, block devices, sockets) are
  refused. Temporary files are registered until committed or aborted;
  :func:`remove_temporaries` (called by the CLI on every exit path, signals included) removes
  any left.

Write failures become :class:`~optimizer.ir.errors.OutputError` (exit 2):
``cannot write PATH: No space left on device``.

Example:
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> with OutputFile(folder / "a.txt", "--out") as out:
    ...     _ = out.file("w").write("hello")
    >>> (folder / "a.txt").read_text()
    'hello'
    >>> check_distinct(  # doctest: +ELLIPSIS
    ...     [("--data", folder / "a.txt")], [("--output", folder / "a.txt")]
    ... )
    Traceback (most recent call last):
    ...
    optimizer.ir.errors.OutputError: --output ... is the same file as --data ...
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from engines import interrupts
from optimizer.ir.errors import OptionError, OutputError

#: Temporary files not yet committed or aborted (removed by remove_temporaries).
_LIVE: set[Path] = set()

Named = tuple[str, "Path | str | None"]  # (what it is, e.g. "--data"; its path, or None)


def _umask() -> int:
    """The process umask (Linux reads it without changing it)."""
    with contextlib.suppress(OSError, ValueError, IndexError), open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _stat(path: Path | str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except (OSError, ValueError):
        return None


def _same(a: Path | str, b: Path | str) -> bool:
    """Whether two paths name the same file (symlinks followed, hard links included)."""
    sa, sb = _stat(a), _stat(b)
    if sa is not None and sb is not None:
        if stat.S_ISCHR(sa.st_mode):
            return False
        return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)
    if sa is None and sb is None:
        return os.path.realpath(a) == os.path.realpath(b)
    return False


def same_file(a: Path | str, b: Path | str) -> bool:
    """Whether two paths name the same file, as :func:`check_distinct` decides it."""
    return _same(a, b)


def check_distinct(inputs: Sequence[Named], outputs: Sequence[Named]) -> None:
    """OutputError unless every output is a different file from every input and from the
    other outputs (``-``, stdout, is skipped)."""
    outs = [(what, p) for what, p in outputs if p is not None and str(p) != "-"]
    ins = [(what, p) for what, p in inputs if p is not None and str(p) != "-"]
    for k, (what, path) in enumerate(outs):
        for in_what, in_path in ins:
            if _same(path, in_path):
                raise OutputError(
                    f"{what} {path} is the same file as {in_what} {in_path}: "
                    "hycq never writes over its input",
                    hint=f"give {what} another path",
                )
        for other_what, other in outs[:k]:
            if _same(path, other):
                raise OutputError(
                    f"{other_what} and {what} name the same file ({path}): "
                    "one would overwrite the other",
                    hint="give each output its own path",
                )


def check_read_once(option: str, paths: Sequence[Path | str]) -> None:
    """OptionError when two of an option's input files are one file (by name, symlink or
    hard link): what it reads from them would count twice."""
    for k, path in enumerate(paths):
        for other in paths[:k]:
            if _same(path, other) and _stat(path) is not None:
                raise OptionError(
                    f"{option} {other} and {path} are the same file: it would be read twice",
                    hint=f"give {option} each file once",
                )


def check_writable(path: Path | str, option: str) -> None:
    """OutputError unless ``path`` can be written as an output file (checked before work)."""
    path = Path(path)
    st = _stat(path)
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise OutputError(f"{option} {path} is a directory", hint="give a file path")
    if st is not None and not stat.S_ISREG(st.st_mode):
        if stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode):
            if not os.access(path, os.W_OK):
                raise OutputError(f"cannot write {path}: permission denied")
            return  # written in place
        raise OutputError(
            f"{option} {path} is not a regular file, a FIFO or a character device",
            hint="give a file path",
        )
    target = _target(path)
    folder = target.parent
    if not folder.exists():
        raise OutputError(
            f"output folder does not exist: {folder}", hint=f"create it or fix {option}"
        )
    if not folder.is_dir():
        raise OutputError(f"{option} {path}: {folder} is not a folder")
    try:  # the one reliable test (read-only file systems, ACLs, root on a ro mount)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as err:
        raise OutputError(
            f"cannot write {path}: {err.strerror or err}", hint=f"choose another {option}"
        ) from None
    os.close(fd)
    os.unlink(probe)


def _target(path: Path) -> Path:
    """The file a write to ``path`` must replace: symlinks (of any depth) followed."""
    return Path(os.path.realpath(path))


class OutputFile:
    """One output being written (see the module docstring).

    ``file(mode)`` opens it (once); ``commit()`` makes it appear at ``path``; ``abort()``
    removes what was written. As a context manager it commits on success and aborts on any
    exception (signals included). OSErrors of the writes, of ``commit`` and of the
    ``errors()`` context become OutputError.
    """

    def __init__(
        self, path: Path | str, option: str, partial: Path | None = None, append: bool = False
    ) -> None:
        self.path = Path(path)
        self.option = option
        self._fh: IO[Any] | None = None
        self.tmp: Path | None = None
        #: a checkpointed run's file (engines/runtime/checkpoint.py): written at ``partial``
        #: (kept on abort and crash, continued with ``append`` on resume) and moved into place
        #: when the run ends
        self.partial = partial is not None
        self._append = append
        st = _stat(self.path)
        if st is not None and not stat.S_ISREG(st.st_mode):
            check_writable(self.path, option)  # a FIFO or character device: in place
            self.target = self.path
            self._mode: int | None = None
            return
        self.target = _target(self.path)
        self._mode = stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask()
        if partial is not None:
            self.tmp = partial
            if not append:
                with self.errors():
                    partial.write_bytes(b"")
            return
        with self.errors():
            fd, name = tempfile.mkstemp(
                dir=self.target.parent, prefix=f".{self.target.name}.", suffix=".tmp"
            )
        os.close(fd)
        self.tmp = Path(name)
        _LIVE.add(self.tmp)

    @property
    def in_place(self) -> bool:
        """Written straight into a FIFO or device (no temporary file)."""
        return self.tmp is None

    @contextlib.contextmanager
    def errors(self) -> Iterator[None]:
        """Turn OSErrors into ``cannot write PATH: reason`` (exit 2)."""
        try:
            yield
        except OutputError:
            raise
        except OSError as err:
            reason = err.strerror or str(err).strip().splitlines()[0] or type(err).__name__
            raise OutputError(
                f"cannot write {self.path}: {reason}", hint=f"choose another {self.option}"
            ) from None

    def file(self, mode: str = "wb") -> IO[Any]:
        """The open file to write to (``"w"``: UTF-8 text, ``"wb"``: bytes)."""
        if self._fh is None:
            with self.errors():
                if self.tmp is not None:
                    if self._append:
                        mode = mode.replace("w", "a")
                    self._fh = open(self.tmp, mode, **_text(mode))  # noqa: SIM115
                else:
                    self._fh = _open_in_place(self.path, mode)
        return self._fh

    def commit(self) -> None:
        """Close and move the file into place (an in-place output is just closed); on
        failure nothing is left behind."""
        try:
            self._commit()
        except BaseException:
            self.abort()
            raise

    def _commit(self) -> None:
        with self.errors():
            if self._fh is not None:
                fh, self._fh = self._fh, None
                fh.close()
            if self.tmp is None:
                return
            if self._mode is not None:
                os.chmod(self.tmp, self._mode)
            try:
                os.replace(self.tmp, self.target)
            except OSError as err:
                if err.errno != errno.EXDEV:  # a partial file on another file system: copied
                    raise
                with OutputFile(self.path, self.option) as copy, open(self.tmp, "rb") as src:
                    shutil.copyfileobj(src, copy.file("wb"))
                self.tmp.unlink()
        _LIVE.discard(self.tmp)
        self.tmp = None

    def sync(self) -> int:
        """Flush what was written to disk and return its size in bytes (a checkpoint's
        committed position)."""
        with self.errors():
            if self._fh is None:
                return self.tmp.stat().st_size if self.tmp is not None and self.tmp.exists() else 0
            self._fh.flush()
            os.fsync(self._fh.fileno())
            return os.fstat(self._fh.fileno()).st_size

    def abort(self) -> None:
        """Remove what was written (never raises); a checkpointed run's partial file is kept
        for ``--resume``."""
        if self._fh is not None:
            fh, self._fh = self._fh, None
            with contextlib.suppress(Exception):
                fh.close()
        if self.partial:
            return
        if self.tmp is not None:
            with contextlib.suppress(OSError):
                self.tmp.unlink()
            _LIVE.discard(self.tmp)
            self.tmp = None

    def __enter__(self) -> OutputFile:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if kind is None:
            self.commit()
        else:
            self.abort()


def _text(mode: str) -> dict[str, Any]:
    return {} if "b" in mode else {"encoding": "utf-8", "newline": ""}


def _open_in_place(path: Path, mode: str) -> IO[Any]:
    """Open a FIFO or device for writing. A FIFO without a reader is waited for, but a stop
    request (a signal during ``hycq run``) ends the wait."""
    st = os.stat(path)
    if not stat.S_ISFIFO(st.st_mode):
        return open(path, mode, **_text(mode))
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError as err:
            if err.errno != errno.ENXIO:  # ENXIO: no reader yet
                raise
        interrupts.check_stop()
        time.sleep(0.1)
    os.set_blocking(fd, True)
    return os.fdopen(fd, mode, **_text(mode))


def write_bytes(path: Path | str, data: bytes | str, option: str) -> None:
    """Write a whole output file atomically (text as UTF-8)."""
    out = OutputFile(path, option)
    with out, out.errors():
        out.file("wb").write(data.encode("utf-8") if isinstance(data, str) else data)


def remove_temporaries() -> None:
    """Remove every temporary file not yet committed or aborted (any exit path)."""
    for tmp in list(_LIVE):
        with contextlib.suppress(OSError):
            tmp.unlink()
        _LIVE.discard(tmp)
