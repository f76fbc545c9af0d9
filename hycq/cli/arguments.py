"""The value checks of option arguments (argparse types that exit 2 naming the flag) and the
parsers every command's parser is made of: ``error: ...`` messages, ``--debug`` after the
command.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from typing import Any, NoReturn

from optimizer.ir.errors import HycqError, did_you_mean
from optimizer.ir.limits import (
    LIMIT,
    MAX_RATE,
    MAX_SEED,
    MAX_SKEW,
)


class Parser(argparse.ArgumentParser):
    """argparse with the errors of docs/interface.md: ``error: ...`` and exit status 2."""

    def error(self, message: str) -> NoReturn:
        hint = f"see '{self.prog} --help'"
        m = re.search(r"invalid choice: '(.*?)' \(choose from (.*)\)", message)
        if m:
            choices = [c.strip(" '") for c in m.group(2).split(",")]
            hint = did_you_mean(m.group(1), choices) or hint
        sys.stderr.write(f"error: {message}\n  hint: {hint}\n")
        raise SystemExit(2)


class CommandParser(Parser):
    """A subcommand's parser: takes ``--debug`` too, so it may come after the subcommand
    (the top-level default stays when it is not given here)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.add_argument(
            "--debug",
            action="store_true",
            default=argparse.SUPPRESS,
            help="show tracebacks of internal errors",
        )


def bounded_float(high: float) -> Any:
    """An argparse type: a number in (0, high]."""

    def parse(text: str) -> float:
        value = _float(text)
        if not (math.isfinite(value) and 0 < value <= high):
            raise argparse.ArgumentTypeError(
                f"must be a positive number up to {high:g}, got '{text}'"
            )
        return value

    return parse


#: A number in (0, LIMIT] (optimizer/ir/limits.py): spans, intervals, sizes, factors.
positive_float = bounded_float(LIMIT)


#: A rate, tuples per event-second, in (0, MAX_RATE].
rate_float = bounded_float(MAX_RATE)


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got '{text}'") from None


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got '{text}'") from None


def bounded_int(low: int, high: int, what: str = "") -> Any:
    """An argparse type: an integer in [low, high] (``what`` says what it counts)."""

    def parse(text: str) -> int:
        value = _int(text)
        if not low <= value <= high:
            kind = "a positive integer" if low == 1 else f"an integer >= {low}"
            raise argparse.ArgumentTypeError(f"must be {kind} up to {high:,}{what}, got '{text}'")
        return value

    return parse


#: A positive count (rows, repeats, plugs...) up to LIMIT.
positive_int = bounded_int(1, int(LIMIT))


non_negative_int = bounded_int(0, int(LIMIT))


seed_int = bounded_int(0, MAX_SEED)


def skew_float(text: str) -> float:
    """A Zipf exponent in [0, MAX_SKEW]."""
    value = _float(text)
    if not (math.isfinite(value) and 0 <= value <= MAX_SKEW):
        raise argparse.ArgumentTypeError(f"must be a number in [0, {MAX_SKEW:g}], got '{text}'")
    return value


def non_negative_float(text: str) -> float:
    """A number in [0, LIMIT]."""
    value = _float(text)
    if not (math.isfinite(value) and 0 <= value <= LIMIT):
        raise argparse.ArgumentTypeError(
            f"must be a number >= 0 and at most {LIMIT:g}, got '{text}'"
        )
    return value


def fraction(text: str) -> float:
    """A number in (0, 1]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got '{text}'") from None
    if not (math.isfinite(value) and 0 < value <= 1):
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1], got '{text}'")
    return value


def column_names(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names and text.strip():
        raise argparse.ArgumentTypeError(f"expected column names, got '{text}'")
    return names


def open_fraction(text: str) -> float:
    """A number in (0, 1)."""
    value = fraction(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1), got '{text}'")
    return value


def package_version() -> str:
    """The installed package's version (its metadata); ``hycq.__version__`` when hycq runs
    from a source tree that is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hycq")
    except PackageNotFoundError:
        from hycq import __version__

        return __version__


def engine_names(columnar: bool = False) -> str:
    """The registered engine names for help texts (built-ins and installed plugins)."""
    from engines import registry

    try:
        names = registry.columnar_names() if columnar else registry.names()
    except HycqError:  # a broken plugin: reported when an engine is looked up
        from engines.registry import BUILTIN_MODULES

        names = tuple(m.split(".")[1] for m in BUILTIN_MODULES)
    return ",".join(names)


def default_duration() -> float:
    from engines.defaults import DEFAULT_DURATION_S

    return DEFAULT_DURATION_S
