"""``hycq run``'s options that need more than a type check: the placement file, live migration,
checkpoints, the quality target's flags, the engines a migration may reach.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from hycq.cli.arguments import (
    engine_names,
)
from optimizer.ir.errors import OptionError


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's dict; a key given twice raises (json keeps the last one silently)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def load_placement(spec: str) -> str | dict[str, str]:
    if spec in ("auto", "row", "column"):
        return spec
    path = Path(spec)
    if path.suffix.lower() != ".json":
        raise OptionError(f"--placement must be auto, row, column or a .json file, got '{spec}'")
    try:
        obj = json.loads(path.read_text(encoding="utf-8-sig"), object_pairs_hook=_unique_keys)
    except _DuplicateKey as dup:
        raise OptionError(
            f"placement file {path}: operator '{dup.key}' is given twice",
            hint="give each operator id once",
        ) from None
    except FileNotFoundError:
        raise OptionError(f"placement file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise OptionError(f"cannot read placement file {path}: {err}") from None
    except json.JSONDecodeError as err:
        raise OptionError(
            f"placement file {path}:{err.lineno}:{err.colno}: invalid JSON: {err.msg}"
        ) from None
    if not isinstance(obj, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in obj.items()
    ):
        raise OptionError(
            f"placement file {path} must be a JSON object mapping operator ids to engine "
            f"names ({', '.join(engine_names().split(','))})",
            hint='e.g. {"aggregate1": "duckdb"}',
        )
    from engines import registry

    for op_id, engine in obj.items():
        registry.get(engine, f"placement file {path} (operator '{op_id}')")
    return obj


def migration_options(args: argparse.Namespace) -> Any:
    from hycq.migrations import MigrationOptions, parse_migrate

    return MigrationOptions(  # checks its flag combinations itself
        migrate=tuple(parse_migrate(m) for m in args.migrate),
        strategy=args.migration,
        adapt=args.adapt,
        reoptimize_every=args.reoptimize_every,
    )


def checkpoint_options(args: argparse.Namespace) -> Any:
    """``--checkpoint``/``--checkpoint-every``/``--resume`` as CheckpointOptions (or None)."""
    from engines.runtime.checkpoint import CheckpointOptions

    if args.resume is not None:
        if args.checkpoint is not None and args.checkpoint.resolve() != args.resume.resolve():
            raise OptionError(
                "--resume DIR continues writing checkpoints to DIR: --checkpoint names another "
                "folder",
                hint="drop --checkpoint",
            )
        return CheckpointOptions(args.resume, args.checkpoint_every, resume=True)
    if args.checkpoint is not None:
        return CheckpointOptions(args.checkpoint, args.checkpoint_every)
    return None


def checkpoint_files(checkpoint: Any) -> list[tuple[str, Path]]:
    """The files a checkpointed run writes into its folder under fixed names (its output and
    dead letters as they grow): outputs too, never an input or another output."""
    from engines.runtime.checkpoint_store import DEAD_LETTER_PARTIAL, OUTPUT_PARTIAL

    if checkpoint is None:
        return []
    flag = "--resume" if checkpoint.resume else "--checkpoint"
    return [(flag, checkpoint.directory / n) for n in (OUTPUT_PARTIAL, DEAD_LETTER_PARTIAL)]


def check_quality_flags(kind: str, quality: Any) -> None:
    """A quality target goes with ``--disorder quality`` and that policy needs one (exit 2);
    whether the query is one the models serve is checked when the run builds the policy,
    before any tuple is read (engines/disorder/quality.py)."""
    if kind == "quality" and (quality is None or quality.target is None):
        raise OptionError(
            "--disorder quality needs a quality target",
            hint="add --max-error EPS [--confidence C] for a windowed aggregate, or "
            "--min-recall GAMMA for a window join (docs/disorder-quality.md)",
        )
    if kind != "quality" and quality is not None:
        raise OptionError(
            "--max-error, --confidence, --min-recall, --recall-period, --adapt-method and "
            f"--quality-param only apply to --disorder quality (this run has --disorder {kind})",
            hint="add --disorder quality, or drop the quality flags",
        )


def reachable_engines(
    migration: Any, flag: str, placement: str | dict[str, str], column_engine: str
) -> tuple[str, ...]:
    """The engines the run's plans may use. A forced strategy that moves row-engine state
    (``--migration ms|jisc|pt|hybmig|hybmig-lazy``) can only migrate between all-row plans:
    then ``--placement auto`` plans over the row engine alone, at the start as at every
    re-optimization (a note says so), and a placement with columnar operators is refused
    before the run (the first migration could only fail)."""
    from engines.migration import strategies

    engines = ("row", column_engine)
    if migration.strategy == "auto" or not migration.requested:
        return engines
    if not strategies.get(migration.strategy).row_only:
        return engines
    if placement == "auto":
        sys.stderr.write(
            f"note: --migration {migration.strategy} moves row-engine state: the run plans "
            "over the row engine only (--placement auto, and every re-optimization of "
            "--adapt)\n"
        )
        return ("row",)
    columnar = placement == "column" or (
        isinstance(placement, dict) and any(e != "row" for e in placement.values())
    )
    if columnar:
        raise OptionError(
            f"--migration {migration.strategy} moves row-engine state, but --placement "
            f"{flag} runs operators on a columnar engine: no migration of this run could "
            "happen",
            hint="use --placement row or auto, or --migration gpt, gms or ghm",
        )
    return engines
