"""Query text -> one sqlglot SELECT, with every syntax error mapped to a positioned QueryError.

This is the only place that calls sqlglot's parser. It also rejects, with a position and a
hint, statements hycq does not run (DDL, DML, several statements, set operations, ORDER BY,
LIMIT, CTEs): the binder then only sees single SELECT trees.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token, TokenType

from optimizer.ir.errors import QuerySyntaxError, Source, UnsupportedError
from optimizer.sql.dialect import CQL, CqlParseError

_DIALECT = CQL()

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
        message = str(err)
        line, col = _line_col_from_message(message)
        offset = _offset_of(source, line, col) if line else len(source.text.rstrip())
        raise QuerySyntaxError(
            _clean_token_message(message),
            source,
            offset,
            hint="check quotes and brackets",
        ) from None


def parse_select(source: Source) -> exp.Select:
    """Parse ``source`` into exactly one SELECT or raise a positioned QueryError."""
    tokens = tokenize(source)
    meaningful = [t for t in tokens if t.token_type != TokenType.SEMICOLON]
    if not meaningful:
        raise QuerySyntaxError(
            "the query is empty", source, 0, hint="write a SELECT statement"
        )
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

    try:
        trees = _DIALECT.parser().parse(tokens, source.text)
    except CqlParseError as err:
        raise QuerySyntaxError(str(err.args[0]), source, err.offset, err.length, err.hint) from None
    except ParseError as err:
        raise _from_sqlglot(err, source) from None
    trees = [t for t in trees if t is not None]
    if len(trees) != 1:  # pragma: no cover - _check_single_statement catches this first
        raise QuerySyntaxError("expected exactly one statement", source, 0)
    tree = trees[0]
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


def _from_sqlglot(err: ParseError, source: Source) -> QuerySyntaxError:
    info = err.errors[0] if err.errors else {}
    line, col = info.get("line"), info.get("col")
    highlight = info.get("highlight") or ""
    description = info.get("description") or str(err)
    if line and col:
        # sqlglot reports the column of the *last* character of the offending token.
        start_col = max(1, col - len(highlight) + 1) if highlight else col
        offset = _offset_of(source, line, start_col)
    else:
        offset = len(source.text.rstrip())
    message, hint = _friendly(description, highlight)
    return QuerySyntaxError(message, source, offset, max(1, len(highlight)), hint)


def _friendly(description: str, highlight: str) -> tuple[str, str | None]:
    """Turn sqlglot's internal wording into a user-facing message and hint."""
    if description.startswith("Required keyword:"):
        return f"incomplete clause near '{highlight}'", "a clause is missing its expression"
    if description.startswith("Invalid expression / Unexpected token"):
        return f"unexpected '{highlight}'", "check the syntax around this token"
    if description.startswith("Expecting"):
        return f"expected {description[len('Expecting ') :]} near '{highlight}'", None
    return f"syntax error: {description}" + (f" near '{highlight}'" if highlight else ""), None


def _offset_of(source: Source, line: int, col: int) -> int:
    lines = source.text.split("\n")
    line = max(1, min(line, len(lines)))
    return sum(len(x) + 1 for x in lines[: line - 1]) + max(0, col - 1)


def _line_col_from_message(message: str) -> tuple[int, int]:
    import re

    m = re.search(r"[Ll]ine (\d+), [Cc]ol(?:umn)?:? (\d+)", message)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def _clean_token_message(message: str) -> str:
    head = message.split(".")[0].strip()
    if "Missing" in message or "missing" in message:
        return "unterminated string or quoted identifier"
    return head or "invalid token"
