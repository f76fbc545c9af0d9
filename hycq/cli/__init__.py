"""The ``hycq`` command line: one module per command (``cmd_*.py``, each with
``register(subparsers)`` and ``run(args)``), listed in the command table of
:mod:`hycq.cli.app`; the flags several commands share are in :mod:`hycq.cli.flag_groups`, the
argument types in :mod:`hycq.cli.arguments`. docs/interface.md is the interface scripts rely on.
"""

from hycq.cli.app import build_parser, main

__all__ = ["build_parser", "main"]
