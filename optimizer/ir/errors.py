"""The one error hierarchy of hycq.

Every failure the project raises on purpose derives from :class:`HycqError`. The split that
matters to users is the exit status (see CONTRACT.md):

* :class:`UserError` (exit 2): the user can fix it (query, catalog, config, data, options).
  Its ``render()`` gives one ``error: ...`` message, with ``FILE:LINE:COL`` and the offending
  line underlined for query errors, and a hint where we know one.
* :class:`InternalError` (exit 1): a bug in hycq.

Positions are 1-based line and column of the first character of the offending text.

Example:
    >>> src = Source("SELECT x FROM t", "q.sql")
    >>> err = QueryError("unknown column 'x'", src, offset=7, length=1, hint="did you mean 'y'?")
    >>> print(err.render())
    error: q.sql:1:8: unknown column 'x'
      SELECT x FROM t
             ^
      hint: did you mean 'y'?
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass


class HycqError(Exception):
    """Root of every error hycq raises deliberately."""

    exit_code = 1

    def render(self) -> str:
        """The message shown to users on stderr."""
        return f"error: {self}"


class UserError(HycqError):
    """A mistake in user input; exit status 2. ``hint`` says how to fix it."""

    exit_code = 2

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def render(self) -> str:
        text = f"error: {self.message}"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text


@dataclass(frozen=True, slots=True)
class Source:
    """The text of a query (or any positional input) and the name it came from."""

    text: str
    name: str = "<query>"

    def position(self, offset: int) -> tuple[int, int]:
        """1-based (line, column) of a 0-based character offset."""
        offset = max(0, min(offset, len(self.text)))
        breaks = list(_LINE_BREAK.finditer(self.text, 0, offset))
        line_start = breaks[-1].end() if breaks else 0
        return len(breaks) + 1, offset - line_start + 1

    def lines(self) -> list[str]:
        """The lines of the text; line breaks are \\n, \\r\\n or \\r (as sqlglot counts them)."""
        return _LINE_BREAK.split(self.text)

    def line_text(self, line: int) -> str:
        lines = self.lines()
        return lines[line - 1] if 0 < line <= len(lines) else ""


_LINE_BREAK = re.compile(r"\r\n|\r|\n")


class QueryError(UserError):
    """An error at a position in query text: syntax, binding, typing, unsupported constructs."""

    def __init__(
        self,
        message: str,
        source: Source | None = None,
        offset: int | None = None,
        length: int = 1,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint)
        self.source = source
        self.offset = offset
        self.length = max(1, length)
        if source is not None and offset is not None:
            self.line, self.col = source.position(offset)
        else:
            self.line, self.col = 0, 0

    @property
    def file(self) -> str:
        return self.source.name if self.source else "<query>"

    def render(self) -> str:
        if self.source is None or self.offset is None:
            return super().render()
        text = f"error: {self.file}:{self.line}:{self.col}: {self.message}"
        line = self.source.line_text(self.line)
        if line.strip():
            width = max(1, min(self.length, len(line) - self.col + 1))
            pad = "".join(c if c == "\t" else " " for c in line[: self.col - 1])
            text += f"\n  {line}\n  {pad}{'^' * width}"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text

    def __str__(self) -> str:
        if self.source is None or self.offset is None:
            return self.message
        return f"{self.file}:{self.line}:{self.col}: {self.message}"


class QuerySyntaxError(QueryError):
    """The text is not valid CQL."""


class BindError(QueryError):
    """Names, types or semantics do not check out against the catalog."""


class UnsupportedError(QueryError):
    """Valid SQL that hycq does not run (ORDER BY, outer joins, set operations, DDL, ...)."""


class CatalogError(UserError):
    """A catalog file is missing, malformed, or has unknown keys / wrong types."""


class ConfigError(UserError):
    """A configuration file or cost-model selection is invalid."""


class OptionError(UserError):
    """A command-line option has an invalid value."""


class DataError(UserError):
    """An input data file is missing, unreadable or has the wrong schema."""


class OutputError(UserError):
    """An output file cannot be written: a full disk, a read-only folder, a path that names an
    input or another output."""


class CheckpointError(UserError):
    """A checkpoint folder cannot be used: none of its checkpoints is intact, it belongs to
    another query or run, or a new run would overwrite it (engines/runtime/checkpoint.py)."""


class PlanError(UserError):
    """A placement or plan request cannot be honoured (unknown operator id, unsupported engine)."""


class InternalError(HycqError):
    """A bug in hycq: an invariant did not hold."""


def closest(name: str, candidates: Iterable[str]) -> str | None:
    """The candidate closest to ``name`` (case-insensitive), or None when nothing is close."""
    pool = list(candidates)
    lowered = {c.lower(): c for c in pool}
    match = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.6)
    return lowered[match[0]] if match else None


def did_you_mean(name: str, candidates: Iterable[str]) -> str | None:
    """A ``did you mean 'x'?`` hint, or None when nothing is close."""
    match = closest(name, candidates)
    return f"did you mean '{match}'?" if match else None
