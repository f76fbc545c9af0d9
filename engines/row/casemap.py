"""DuckDB's UPPER and LOWER for the row engine, character by character.

DuckDB maps each character on its own (utf8proc's simple case mapping: ``ß`` to ``ẞ``, ``ﬁ``
unchanged, ``Σ`` always to ``σ``), where Python's ``str.upper`` / ``str.lower`` use the full
mappings (``ß`` to ``SS``, ``ﬁ`` to ``FI``, a final ``Σ`` to ``ς``) and the Unicode version
of the running Python. The tables below are DuckDB's own mapping of every character it
changes, generated from the pinned DuckDB (``python -m tests.unit.test_casemap`` rewrites
engines/row/casemap_tables.py, and that test checks them against the installed DuckDB over
every code point; the row engine itself never imports DuckDB). ASCII text, which maps
alike everywhere, takes the fast path.
"""

from __future__ import annotations

from engines.row.casemap_tables import LOWER_FROM, LOWER_TO, UPPER_FROM, UPPER_TO

_UPPER = str.maketrans(UPPER_FROM, UPPER_TO)
_LOWER = str.maketrans(LOWER_FROM, LOWER_TO)


def upper(s: str) -> str:
    """DuckDB's UPPER of ``s``."""
    return s.upper() if s.isascii() else s.translate(_UPPER)


def lower(s: str) -> str:
    """DuckDB's LOWER of ``s``."""
    return s.lower() if s.isascii() else s.translate(_LOWER)
