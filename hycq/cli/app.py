"""The ``hycq`` command line (docs/interface.md is the interface scripts rely on): the
top-level parser, the command table and the one place errors become exit statuses.

Exit status: 0 success; 2 bad user input (one ``error: ...`` message on stderr, no
traceback); 1 internal failure (traceback only with ``--debug``).
"""

from __future__ import annotations

import argparse
import signal
import sys
import traceback
from collections.abc import Sequence
from typing import Any, Protocol

from hycq.cli import (
    cmd_bench,
    cmd_calibrate,
    cmd_data,
    cmd_explain,
    cmd_quality,
    cmd_report,
    cmd_run,
)
from hycq.cli.arguments import (
    CommandParser,
    Parser,
    package_version,
)
from optimizer.ir.errors import HycqError, UserError


def main(argv: Sequence[str] | None = None) -> int:
    from engines import interrupts

    previous = interrupts.install_default()  # SIGTERM/SIGHUP too unwind through cleanup
    code = 1
    try:
        args = build_parser().parse_args(argv)
        code = _main(args)
    except KeyboardInterrupt as err:  # a signal outside the command (argument parsing)
        code = _interrupted(getattr(err, "signum", None))
    finally:
        late = _clean_up(previous)
    return _interrupted(late) if late is not None else code


def _clean_up(previous: dict[int, Any]) -> int | None:
    """Remove every temporary file and restore the signal handlers, even when a signal
    interrupts this; returns the number of such a signal."""
    from engines import interrupts
    from engines.output_files import remove_temporaries

    caught: int | None = None
    while True:
        try:
            remove_temporaries()
            interrupts.restore(previous)
            return caught
        except KeyboardInterrupt as err:
            caught = getattr(err, "signum", None) or signal.SIGINT


def _main(args: argparse.Namespace) -> int:
    from engines import interrupts

    try:
        return _dispatch(args)
    except HycqError as err:
        if not isinstance(err, UserError) and interrupts.received() is not None:
            return _interrupted(interrupts.received())  # e.g. an engine cut short by it
        sys.stderr.write(err.render() + "\n")
        if args.debug and not isinstance(err, UserError):
            traceback.print_exc()
        return err.exit_code
    except KeyboardInterrupt as err:
        return _interrupted(getattr(err, "signum", None) or signal.SIGINT)
    except BrokenPipeError:
        return 0
    except MemoryError:
        sys.stderr.write(
            "error: out of memory\n  hint: the work does not fit this machine: lower --rate, "
            "the window range or the data size (hycq run stops itself earlier: "
            "--memory-limit MB)\n"
        )
        return 2
    except Exception as err:  # noqa: BLE001 - the one place that turns bugs into exit 1
        if interrupts.received() is not None:
            # A signal cut a call short and it reported that as its own error (DuckDB:
            # "Query interrupted"): the process was stopped, it did not fail.
            if args.debug:
                traceback.print_exc()
            return _interrupted(interrupts.received())
        if args.debug:
            traceback.print_exc()
        else:
            sys.stderr.write(
                f"internal error: {type(err).__name__}: {err}\n"
                "  this is a bug in hycq; rerun with --debug for the traceback\n"
            )
        return 1


def _interrupted(signum: int | None) -> int:
    sig = signal.Signals(signum or signal.SIGINT)
    sys.stderr.write(f"interrupted by {sig.name}\n")
    return 128 + int(sig)


def _dispatch(args: argparse.Namespace) -> int:
    return COMMANDS[args.command].run(args)


class Command(Protocol):
    """A command module: it adds its parser to the top-level subparsers and runs the parsed
    arguments, returning the exit status (errors raise a HycqError, turned into one above)."""

    def register(self, sub: Any) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


#: The commands in the order ``hycq --help`` lists them: a new command is one module with
#: ``register(sub)`` and ``run(args)`` and one line here.
COMMANDS: dict[str, Command] = {
    "explain": cmd_explain,
    "run": cmd_run,
    "report": cmd_report,
    "bench": cmd_bench,
    "calibrate": cmd_calibrate,
    "quality": cmd_quality,
    "data": cmd_data,
}


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="hycq",
        description="Hybrid row/column continuous-query optimizer and executor for CQL.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    parser.add_argument(
        "--version",
        action="version",
        version=f"hycq {package_version()}",
        help="print 'hycq VERSION' and exit",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=CommandParser)
    sub.required = True
    for command in COMMANDS.values():
        command.register(sub)
    return parser
