"""Query text -> one sqlglot SELECT, with every syntax error mapped to a positioned QueryError.

This is the only place that calls sqlglot's parser. It also rejects, with a position and a
hint, statements hycq does not run (DDL, DML, several statements, set operations, ORDER BY,
LIMIT, CTEs): the binder then only sees single SELECT trees.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterator

from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token, TokenType

from optimizer.ir.errors import QuerySyntaxError, Source, UnsupportedError
from optimizer.sql.dialect import CQL, R2S_KEYWORDS, CqlParseError

_DIALECT = CQL()

#: Deepest query accepted, in levels of the syntax tree (the binder checks the tree; here,
#: parentheses): a ``+`` chain of n terms is about n levels deep.
MAX_DEPTH = 128

#: Keyword tokens that make a query unsupported wherever they appear, with a hint.
_UNSUPPORTED_TOKENS: dict[TokenType, tuple[str, str]] = {
    TokenType.ORDER_BY: (
        "ORDER BY is not supported in continuous queries",
        "results are relations per slide instant; sort the output file instead",
    ),
    TokenType.LIMIT: (
        "LIMIT is not supported in continuous queries",
        "filter with WHERE or HAVING instead",
    ),
    TokenType.OFFSET: ("OFFSET is not supported in continuous queries", "remove it"),
    TokenType.UNION: (
        "set operations (UNION) are not supported",
        "run the queries separately; hycq supports SPJA queries",
    ),
    TokenType.INTERSECT: ("set operations (INTERSECT) are not supported", "use a join"),
    TokenType.EXCEPT: ("set operations (EXCEPT) are not supported", "use a filter"),
    TokenType.WITH: (
        "WITH (common table expressions) is not supported",
        "write the subquery in FROM as a derived table: FROM (SELECT ...) AS name",
    ),
    TokenType.QUALIFY: ("QUALIFY is not supported", "use HAVING or a derived table"),
    TokenType.OVER: (
        "SQL window functions (OVER ...) are not supported",
        "use a CQL window on the stream, e.g. readings [RANGE 5 MINUTES]",
    ),
}

_STATEMENT_WORDS = {
    "CREATE",
    "INSERT",
    "UPDATE",
    "DELETE",
    "DROP",
    "ALTER",
    "COPY",
    "ATTACH",
    "PRAGMA",
    "SET",
    "INSTALL",
    "LOAD",
    "EXPLAIN",
    "CALL",
    "MERGE",
    "TRUNCATE",
    "VACUUM",
    "DESCRIBE",
    "SHOW",
    "USE",
    "EXPORT",
    "IMPORT",
    "DETACH",
    "CHECKPOINT",
    "GRANT",
    "REVOKE",
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    "VALUES",
    "SUMMARIZE",
    "PIVOT",
    "UNPIVOT",
}


def tokenize(source: Source) -> list[Token]:
    """Tokens of the query, or a positioned syntax error (unterminated string, bad character)."""
    try:
        return list(_DIALECT.tokenize(source.text))
    except TokenError as err:
        message, offset, hint = _token_error(err, source.text)
        raise QuerySyntaxError(message, source, offset, hint=hint) from None


def _token_error(err: TokenError, text: str) -> tuple[str, int, str]:
    """Message, offset and hint of a tokenizer failure.

    sqlglot wraps the real failure: ``Missing ' from LINE:OFFSET`` (OFFSET is the 0-based
    start of the unterminated literal) or, for an unterminated ``/*`` comment, an IndexError.
    """
    cause = err.__cause__ if isinstance(err.__cause__, TokenError) else err
    m = re.search(r"Missing (.+?) from \d+:(\d+)", str(cause))
    if m:
        delimiter, offset = m.group(1), min(int(m.group(2)), len(text))
        what = {"'": "string", '"': "quoted identifier"}.get(delimiter, "literal")
        return (
            f"unterminated {what}: missing closing {delimiter}",
            offset,
            f"close it with {delimiter}"
            + (" (write '' for a quote inside a string)" if delimiter == "'" else ""),
        )
    m = re.search(r"Numeric string contains invalid characters from \d+:(\d+)", str(cause))
    if m:
        return "invalid number literal", min(int(m.group(1)), len(text)), "check the digits"
    comment = text.rfind("/*")
    if comment >= 0 and "*/" not in text[comment + 2 :]:
        return "unterminated comment: missing closing */", comment, "close it with */"
    return "cannot read the query text here", len(text.rstrip()), "check quotes and brackets"


def parse_select(source: Source) -> exp.Select:
    """Parse ``source`` into exactly one SELECT or raise a positioned QueryError."""
    tokens = tokenize(source)
    meaningful = [t for t in tokens if t.token_type != TokenType.SEMICOLON]
    if not meaningful:
        raise QuerySyntaxError("the query is empty", source, 0, hint="write a SELECT statement")
    first = meaningful[0]
    if first.text.upper() in _STATEMENT_WORDS:
        raise UnsupportedError(
            f"{first.text.upper()} statements are not supported",
            source,
            first.start,
            len(first.text),
            hint="hycq runs one continuous SELECT query",
        )
    _check_single_statement(tokens, source)
    for tok in tokens:
        if tok.token_type in _UNSUPPORTED_TOKENS:
            message, hint = _UNSUPPORTED_TOKENS[tok.token_type]
            raise UnsupportedError(message, source, tok.start, tok.end - tok.start + 1, hint)
    _check_parens(tokens, source)
    tokens = _drop_redundant_parens(tokens)
    _check_paren_depth(tokens, source)

    tokens = _r2s_after_distinct(tokens)
    try:
        parser = _DIALECT.parser(error_message_context=len(source.text) + 1)
        with _deep_recursion():  # sqlglot recurses ~20 frames per parenthesis level
            trees = parser.parse(tokens, source.text)
    except CqlParseError as err:
        raise QuerySyntaxError(str(err.args[0]), source, err.offset, err.length, err.hint) from None
    except ParseError as err:
        raise _from_sqlglot(err, source) from None
    except RecursionError:
        raise QuerySyntaxError(
            "the query is nested too deeply",
            source,
            first.start,
            len(first.text),
            hint="simplify the expression or split it over derived tables",
        ) from None
    # A comment after the last ';' comes back as a Semicolon "statement".
    statements = [t for t in trees if t is not None and not isinstance(t, exp.Semicolon)]
    if len(statements) != 1:  # pragma: no cover - _check_single_statement catches this first
        raise QuerySyntaxError("expected exactly one statement", source, 0)
    tree = statements[0]
    if not isinstance(tree, exp.Select):
        offset = first.start
        raise UnsupportedError(
            f"only SELECT queries are supported, not {tree.key.upper()}",
            source,
            offset,
            len(first.text),
            hint="hycq runs one continuous SELECT query",
        )
    return tree


def _r2s_after_distinct(tokens: list[Token]) -> list[Token]:
    """``SELECT ISTREAM DISTINCT ...`` as ``SELECT DISTINCT ISTREAM ...``: both orders mean
    the same (docs/semantics.md), but the DuckDB grammar reads ALL/DISTINCT right after
    SELECT, before any modifier. The tokens keep their positions, so errors still point at
    the text as written."""
    out = list(tokens)
    for i, tok in enumerate(out):
        if tok.token_type != TokenType.SELECT:
            continue
        j = i + 1
        while j < len(out) and out[j].text.upper() in R2S_KEYWORDS:
            j += 1
        if j > i + 1 and j < len(out) and out[j].token_type in (TokenType.DISTINCT, TokenType.ALL):
            out[i + 1 : j + 1] = [out[j], *out[i + 1 : j]]
    return out


def _check_single_statement(tokens: list[Token], source: Source) -> None:
    depth = 0
    for i, tok in enumerate(tokens):
        if tok.token_type in (TokenType.L_PAREN, TokenType.L_BRACKET):
            depth += 1
        elif tok.token_type in (TokenType.R_PAREN, TokenType.R_BRACKET):
            depth -= 1
        elif tok.token_type == TokenType.SEMICOLON and depth <= 0:
            rest = [t for t in tokens[i + 1 :] if t.token_type != TokenType.SEMICOLON]
            if rest:
                raise UnsupportedError(
                    "several statements are not supported",
                    source,
                    rest[0].start,
                    len(rest[0].text),
                    hint="put one query per file",
                )


def _check_parens(tokens: list[Token], source: Source) -> None:
    """Unbalanced parentheses and empty list items, found before sqlglot: it accepts
    ``FLOOR(x`` unclosed and drops the empty item of ``a,, b`` or ``f(, x)``."""
    opened: list[Token] = []
    for prev, tok in zip([None, *tokens], tokens, strict=False):
        if (
            tok.token_type == TokenType.COMMA
            and prev is not None
            and prev.token_type
            in (
                TokenType.COMMA,
                TokenType.L_PAREN,
            )
        ):
            raise QuerySyntaxError(
                "unexpected ','", source, tok.start, 1, hint="a list item is missing here"
            )
        if tok.token_type == TokenType.L_PAREN:
            opened.append(tok)
        elif tok.token_type == TokenType.R_PAREN:
            if not opened:
                raise QuerySyntaxError(
                    "unmatched ')'", source, tok.start, 1, hint="remove it or add the '(' it closes"
                )
            opened.pop()
    if opened:
        raise QuerySyntaxError(
            "'(' is never closed", source, opened[-1].start, 1, hint="add the missing ')'"
        )


def _pairs(tokens: list[Token]) -> dict[int, int]:
    """Index of each '(' -> index of its ')' (parentheses are balanced: _check_parens)."""
    out: dict[int, int] = {}
    opened: list[int] = []
    for i, tok in enumerate(tokens):
        if tok.token_type == TokenType.L_PAREN:
            opened.append(i)
        elif tok.token_type == TokenType.R_PAREN and opened:
            out[opened.pop()] = i
    return out


def _drop_redundant_parens(tokens: list[Token]) -> list[Token]:
    """``((x))`` -> ``(x)``, ``f((x))`` -> ``f(x)``: a pair right inside another pair says
    nothing, and would only cost sqlglot recursion (any number of them is accepted)."""
    pairs = _pairs(tokens)
    drop: set[int] = set()
    for i, j in pairs.items():
        if pairs.get(i + 1) == j - 1:
            drop |= {i + 1, j - 1}
    return [t for k, t in enumerate(tokens) if k not in drop] if drop else tokens


def _check_paren_depth(tokens: list[Token], source: Source) -> None:
    """Parentheses nested deeper than MAX_DEPTH (after dropping redundant ones) are an error
    here, before sqlglot: each level is at least one level of the query."""
    depth = 0
    for tok in tokens:
        if tok.token_type == TokenType.L_PAREN:
            depth += 1
            if depth > MAX_DEPTH:
                raise UnsupportedError(
                    f"the query is nested too deeply (more than {MAX_DEPTH} levels of parentheses)",
                    source,
                    tok.start,
                    1,
                    hint="simplify the expression or split it over derived tables",
                )
        elif tok.token_type == TokenType.R_PAREN:
            depth -= 1


@contextlib.contextmanager
def _deep_recursion() -> Iterator[None]:
    """Room for sqlglot's recursive descent through MAX_DEPTH levels of parentheses."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 40 * MAX_DEPTH + 2000))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def _from_sqlglot(err: ParseError, source: Source) -> QuerySyntaxError:
    info = err.errors[0] if err.errors else {}
    highlight = info.get("highlight") or ""
    description = info.get("description") or str(err)
    start_context = info.get("start_context")
    if start_context is not None and (highlight or start_context):
        # The parser runs with a context as long as the query: the text before the offending
        # token is all of start_context (sqlglot's own line numbers count '\r' as a break).
        offset = len(start_context)
    else:
        offset = len(source.text.rstrip())
    message, hint = _friendly(description, highlight, source.text[offset + len(highlight) :])
    return QuerySyntaxError(message, source, offset, max(1, len(highlight)), hint)


_TOKEN_REPR = re.compile(r"<Token token_type: TokenType\.(\w+), text: (.*?), line: \d+.*?>")


def _friendly(description: str, highlight: str, after: str) -> tuple[str, str | None]:
    """Turn sqlglot's internal wording into a user-facing message and hint."""
    description = _TOKEN_REPR.sub(
        lambda m: "the end of the query" if m.group(1) == "SENTINEL" else f"'{m.group(2)}'",
        description,
    )
    near = highlight.split("\n")[0]
    if highlight == "[" and re.match(r"\s*(RANGE|ROWS|NOW|UNBOUNDED)\b", after, re.IGNORECASE):
        return (
            "unexpected window clause",
            "the window goes right after the stream name, before its alias: "
            "readings [RANGE 1 MINUTE] AS r",
        )
    if description.startswith("Required keyword:"):
        return f"incomplete clause near '{near}'", "a clause is missing its expression"
    if description.startswith("Invalid expression / Unexpected token"):
        return f"unexpected '{near}'", "check the syntax around this token"
    if description.startswith("Expecting"):
        return f"expected {description[len('Expecting ') :]} near '{near}'", None
    m = re.match(
        r"The number of provided arguments \((\d+)\) is greater than the maximum number of "
        r"supported arguments \((\d+)\)",
        description,
    )
    if m:
        return f"too many arguments: {m.group(1)} given, at most {m.group(2)} allowed", None
    if description.startswith("Expected table name"):
        return f"expected a stream name after '{near}'", "FROM readings [RANGE 1 MINUTE]"
    first = description[:1].lower() + description[1:]
    return f"syntax error: {first}" + (f" near '{near}'" if near else ""), None
