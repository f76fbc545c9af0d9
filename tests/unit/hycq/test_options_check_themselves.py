"""Options dataclasses check themselves (``__post_init__``): the API and the experiments get
the refusals the CLI gives for its flags, before anything runs or is measured."""

from __future__ import annotations

import math
from typing import Any

import pytest

from hycq.bench import BenchOptions
from hycq.migrations import MigrationOptions
from optimizer.ir.errors import OptionError


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"rates": []}, "at least one rate"),
        ({"rates": [0.0]}, "--rates"),
        ({"rates": [math.nan]}, "--rates"),
        ({"rates": [1e300]}, "--rates"),
        ({"plans": []}, "--plans names no plan"),
        ({"plans": ["auto", "colum"]}, "unknown plan 'colum'"),
        ({"measure_seconds": 0}, "--measure"),
        ({"repeat": 0}, "--repeat"),
        ({"max_repeat": 0}, "--max-repeat"),
        ({"interleave": 0}, "--interleave"),
        ({"preroll": -1}, "--preroll"),
        ({"precision": 0.0}, "--precision"),
        ({"max_warm_wall": math.inf}, "--warm-limit"),
    ],
)
def test_a_bad_value_is_an_option_error_naming_it(fields: dict[str, Any], message: str) -> None:
    given = {"rates": [1000.0], **fields}
    with pytest.raises(OptionError, match=message.replace("(", r"\(")) as err:
        BenchOptions(**given)
    if "colum" in message:
        assert "column" in (err.value.hint or "")


def test_good_values_are_kept() -> None:
    o = BenchOptions(rates=[500.0, 2000.0], plans=["all"], preroll=0, precision=10)
    assert o.rates == [500.0, 2000.0] and o.plans == ["all"] and o.preroll == 0


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"reoptimize_every": 5.0}, "--reoptimize-every is only for --adapt"),
        ({"strategy": "gms"}, "--migration gms without a migration"),
    ],
)
def test_migration_flags_that_mean_nothing_are_refused(
    fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(OptionError, match=message):
        MigrationOptions(**fields)


def test_migration_options_that_mean_something_are_kept() -> None:
    assert MigrationOptions(strategy="gms", adapt=True, reoptimize_every=5.0).requested
    assert not MigrationOptions().requested
