"""The CQL dialect: DuckDB's SQL plus CQL window clauses and R2S keywords.

Extensions over DuckDB's grammar (see CONTRACT.md, "Queries"):

* a window after any stream reference, before its alias::

      readings [RANGE 5 MINUTES SLIDE 1 SECOND] AS r
      readings [RANGE 10 SECONDS]        -- slide = the stream's time granularity
      readings [ROWS 1000 SLIDE 10]      -- count-based; SLIDE in tuples or with a time unit
      readings [NOW]   readings [UNBOUNDED]

* ``SELECT ISTREAM | DSTREAM | RSTREAM ...``, before or after ``DISTINCT``/``ALL``
  (``optimizer.sql.parse`` moves ``DISTINCT`` first, where DuckDB's grammar reads it).

A window is recognised when ``[`` directly follows a table name (DuckDB has no syntax there;
the next word must be RANGE, ROWS, NOW or UNBOUNDED), so DuckDB's array literals and
subscripts in expressions (``[1, 2][1]``, ``a[2]``) still parse. The parsed window is attached
to the ``exp.Table`` node under the ``cql_window`` arg as a :class:`StreamWindow`.

sqlglot is pinned exactly in pyproject.toml because this module subclasses parser internals
(``_parse_table_parts``, ``_parse_unary``, ``_parse_select`` and ``OPERATION_MODIFIERS``).
"""

from __future__ import annotations

from typing import Any, ClassVar

from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB
from sqlglot.errors import ParseError
from sqlglot.parsers.duckdb import DuckDBParser
from sqlglot.tokens import Token, TokenType

from optimizer.ir.errors import did_you_mean

#: Accepted time units (singular and plural) and their length in milliseconds: fixed lengths
#: only (a day is 24 hours of event time, no calendar; months and years vary, so none).
TIME_UNITS: dict[str, int] = {
    "MILLISECOND": 1,
    "MILLISECONDS": 1,
    "SECOND": 1000,
    "SECONDS": 1000,
    "MINUTE": 60_000,
    "MINUTES": 60_000,
    "HOUR": 3_600_000,
    "HOURS": 3_600_000,
    "DAY": 86_400_000,
    "DAYS": 86_400_000,
    "WEEK": 604_800_000,
    "WEEKS": 604_800_000,
}
WINDOW_KEYWORDS = ("RANGE", "ROWS", "NOW", "UNBOUNDED")
R2S_KEYWORDS = ("ISTREAM", "DSTREAM", "RSTREAM")


class CqlParseError(ParseError):
    """A syntax error inside a CQL extension, with the 0-based offset and length of its token."""

    def __init__(self, message: str, offset: int, length: int, hint: str | None = None) -> None:
        super().__init__(message)
        self.offset = offset
        self.length = length
        self.hint = hint


class StreamWindow(exp.Expression):
    """A parsed window clause.

    Args:
        kind: ``range`` | ``rows`` | ``now`` | ``unbounded``.
        size: the size (time amount or tuple count), a Python int; absent for NOW/UNBOUNDED.
        unit: the size's time unit (canonical plural upper-case), RANGE only.
        slide: the slide amount, or absent for the default.
        slide_unit: the slide's time unit, or absent for a tuple-count slide.
        text: the clause as written (between the brackets), for display.
        start, end: character offsets of ``[`` and ``]`` in the query text.
    """

    arg_types: ClassVar[dict[str, bool]] = {
        "kind": True,
        "size": False,
        "unit": False,
        "slide": False,
        "slide_unit": False,
        "text": True,
        "start": True,
        "end": True,
    }


class CQLParser(DuckDBParser):
    """DuckDB's parser with CQL windows after table references and R2S select modifiers."""

    OPERATION_MODIFIERS: ClassVar[set[str]] = {*DuckDBParser.OPERATION_MODIFIERS, *R2S_KEYWORDS}

    # -- positions ------------------------------------------------------------------------
    # sqlglot records positions only on identifiers, literals and a few other leaves. The
    # binder underlines the offending node, so give every parsed operand (``$1``, ``NULL``,
    # ``[1, 2]``, ``(SELECT ...)``, ``CURRENT_DATE``) and every SELECT its span of text.

    def _parse_unary(self) -> Any:
        start = self._curr
        node = super()._parse_unary()
        return self._spanned(node, start)

    def _parse_select(self, *args: Any, **kwargs: Any) -> Any:
        start = self._curr
        node = super()._parse_select(*args, **kwargs)
        return self._spanned(node, start)

    def _spanned(self, node: Any, start: Token) -> Any:
        end = self._prev
        if (
            isinstance(node, exp.Expression)
            and "start" not in node.meta
            and start.token_type != TokenType.SENTINEL
            and end.token_type != TokenType.SENTINEL
            and end.end >= start.start
        ):
            node.update_positions(start=start.start, end=end.end, line=start.line, col=start.col)
        return node

    def _parse_table_parts(self, *args: Any, **kwargs: Any) -> Any:
        table = super()._parse_table_parts(*args, **kwargs)
        if table is None or self._curr.token_type != TokenType.L_BRACKET:
            return table
        # After a table name '[' can only start a window (DuckDB has no such syntax).
        if self._at_window():
            table.set("cql_window", self._parse_stream_window())
            if self._curr.token_type == TokenType.L_BRACKET:
                raise self._fail("a stream reference takes one window", self._curr, _WINDOW_HINT)
            return table
        word = self._next
        if word and word.text.isidentifier():
            raise self._fail(
                f"unknown window '{word.text}'",
                word,
                did_you_mean(word.text.upper(), WINDOW_KEYWORDS) or _WINDOW_HINT,
            )
        what = (
            "empty window clause"
            if word.token_type == TokenType.R_BRACKET
            else "expected RANGE, ROWS, NOW or UNBOUNDED after '['"
        )
        raise self._fail(what, self._curr, _WINDOW_HINT)

    def _at_window(self) -> bool:
        return bool(
            self._curr
            and self._curr.token_type == TokenType.L_BRACKET
            and self._next
            and self._next.text.upper() in WINDOW_KEYWORDS
        )

    # -- window clause --------------------------------------------------------------------

    def _fail(self, message: str, token: Token | None, hint: str | None = None) -> CqlParseError:
        if token is None or token.token_type == TokenType.SENTINEL:  # end of input
            end = len((self.sql or "").rstrip())
            return CqlParseError(message, end, 1, hint)
        return CqlParseError(message, token.start, token.end - token.start + 1, hint)

    def _window_int(self, what: str) -> int:
        tok = self._curr
        if tok is not None and tok.token_type == TokenType.DASH:
            raise self._fail(f"{what} must be positive", tok)
        if tok is None or tok.token_type != TokenType.NUMBER:
            raise self._fail(f"expected a number for the {what}", tok)
        if not tok.text.isdigit():
            raise self._fail(
                f"{what} must be a whole number, got {tok.text}",
                tok,
                "use a smaller unit, e.g. 1500 MILLISECONDS instead of 1.5 SECONDS",
            )
        value = int(tok.text)
        if value <= 0:
            raise self._fail(f"{what} must be positive, got {value}", tok)
        self._advance()
        return value

    def _window_unit(self, required: bool) -> str | None:
        tok = self._curr
        if tok is None or tok.token_type in (TokenType.R_BRACKET, TokenType.SENTINEL):
            if required:
                raise self._fail("expected a time unit", tok, _UNIT_HINT)
            return None
        word = tok.text.upper()
        if word == "SLIDE" and not required:
            return None
        if word not in TIME_UNITS:
            if not required and tok.token_type != TokenType.VAR:
                return None
            raise self._fail(f"unknown time unit '{tok.text}'", tok, _UNIT_HINT)
        self._advance()
        return word if word.endswith("S") else word + "S"

    def _parse_stream_window(self) -> StreamWindow:
        open_tok = self._curr
        assert open_tok is not None
        self._advance()  # [
        kw = self._curr
        assert kw is not None
        keyword = kw.text.upper()
        self._advance()
        args: dict[str, Any] = {"kind": keyword.lower()}
        if keyword == "RANGE":
            args["size"] = self._window_int("window range")
            args["unit"] = self._window_unit(required=True)
        elif keyword == "ROWS":
            args["size"] = self._window_int("window row count")
        if (
            keyword in ("RANGE", "ROWS", "UNBOUNDED")
            and self._curr
            and (self._curr.text.upper() == "SLIDE")
        ):
            self._advance()
            args["slide"] = self._window_int("window slide")
            args["slide_unit"] = self._window_unit(required=keyword != "ROWS")
        close = self._curr
        if close is None or close.token_type != TokenType.R_BRACKET:
            raise self._fail("expected ']' to close the window clause", close, _WINDOW_HINT)
        self._advance()
        text_src = self.sql or ""
        args["text"] = " ".join(text_src[open_tok.end + 1 : close.start].split())
        args["start"] = open_tok.start
        args["end"] = close.start
        return StreamWindow(**args)


_UNIT_HINT = "units are MILLISECOND(S), SECOND(S), MINUTE(S), HOUR(S), DAY(S) and WEEK(S)"
_WINDOW_HINT = (
    "windows look like [RANGE 5 MINUTES SLIDE 1 SECOND], [ROWS 100], [NOW] or [UNBOUNDED]"
)


class CQL(DuckDB):
    """The CQL dialect (registered with sqlglot as ``cql``)."""

    Parser = CQLParser
