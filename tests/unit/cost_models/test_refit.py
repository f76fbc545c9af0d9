"""``hycq calibrate --from``: refitting a profile with observations from runs."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from cost_models.refit import Observation, predict, refit
from hycq.cli import main

SELECT = 1e-7  # the profile's seconds per select tuple
DUCK = {"select": 8e-9, "project": 4e-9, "aggregate": 12e-9, "join_input": 25e-9,
        "join_output": 10e-9, "fixed": 3e-3}  # fmt: skip


def _profile() -> dict[str, Any]:
    """A small profile: select fitted to 4 points at 100 ns, DuckDB's SQL to 6 slides."""
    xs = [1e5, 2e5, 3e5, 4e5]
    rng = random.Random(1)
    slides = [
        {"aggregate": n, "join_input": 3 * n, "join_output": n}
        for n in (2e4, 5e4, 1e5, 2e5, 3e5, 4e5)
    ]
    ys = [predict({"engines": {"duckdb": DUCK}}, "sql.duckdb", t) * rng.uniform(0.97, 1.03)
          for t in slides]  # fmt: skip
    fits = {
        "row.select": {
            "slope": SELECT,
            "intercept": 0.0,
            "r2": 1.0,
            "x": xs,
            "y": [SELECT * x for x in xs],
        },
    }
    for k in ("aggregate", "join_input", "join_output"):
        fits[f"duckdb.{k}"] = {"slope": DUCK[k], "intercept": DUCK["fixed"], "r2": 0.99,
                               "x": [t[k] for t in slides], "y": ys}  # fmt: skip
    return {"format": 1, "created": "x", "machine": {},
            "parameters": {"select": SELECT, "engines": {"duckdb": dict(DUCK)}},
            "fits": fits}  # fmt: skip


def _selects(per_tuple: float, n: int = 8, noise: float = 0.02) -> list[Observation]:
    rng = random.Random(7)
    return [
        Observation("row.select", {"select": x}, per_tuple * x * rng.uniform(1 - noise, 1 + noise))
        for x in (rng.uniform(5e4, 5e5) for _ in range(n))
    ]


def test_the_constant_moves_toward_observations_that_disagree() -> None:
    new, report = refit(_profile(), _selects(3e-7), holdout=0.0)
    # relative least squares: 4 points at 100 ns, 8 at 300 ns give 136 ns
    assert new["parameters"]["select"] == pytest.approx(1.364e-7, rel=0.02)
    assert new["fits"]["row.select"]["slope"] == new["parameters"]["select"]
    assert report.used == 8 and report.rejected == 0
    # untouched fits keep their constants
    assert new["parameters"]["engines"]["duckdb"] == DUCK


def test_weights_matter() -> None:
    light, _ = refit(_profile(), _selects(3e-7), weight=0.1, holdout=0.0)
    heavy, _ = refit(_profile(), _selects(3e-7), weight=10.0, holdout=0.0)
    lo, hi = light["parameters"]["select"], heavy["parameters"]["select"]
    assert SELECT < lo < 1.1e-7
    assert 2.2e-7 < hi < 3e-7


def test_an_outlier_is_rejected() -> None:
    obs = _selects(1.1e-7)
    outlier = Observation("row.select", {"select": 2e5}, 50 * 1.1e-7 * 2e5, "bad")
    new, report = refit(_profile(), [*obs, outlier], holdout=0.0)
    assert report.rejected == 1 and report.used == len(obs)
    # the fit without the outlier is the fit of the other observations
    assert (
        new["parameters"]["select"]
        == refit(_profile(), obs, holdout=0.0)[0]["parameters"]["select"]
    )
    kept = [p["source"] for p in new["refit"]["points"]]
    assert "bad" not in kept and len(kept) == len(obs)
    # the rule rejected it, not the loss: with an infinite threshold it is used
    assert refit(_profile(), [*obs, outlier], holdout=0.0, k=1e9)[1].rejected == 0


def _machine_b(n: int, seed: int) -> list[Observation]:
    """SQL slides of a machine whose DuckDB is 3x slower per row with 10 ms fixed cost."""
    rng = random.Random(seed)
    b = {**{k: 3 * v for k, v in DUCK.items()}, "fixed": 10e-3}
    out = []
    for _ in range(n):
        rows = rng.uniform(1e4, 5e5)
        terms = {
            "aggregate": rows,
            "join_input": 3 * rows,
            "join_output": rows * rng.uniform(0.5, 1),
        }
        secs = predict({"engines": {"duckdb": b}}, "sql.duckdb", terms) * rng.uniform(0.95, 1.05)
        out.append(Observation("sql.duckdb", terms, secs, "b"))
    return out


def test_held_out_error_drops_on_a_machine_with_other_costs() -> None:
    new, report = refit(_profile(), _machine_b(60, 3), holdout=0.25, seed=5)
    fr = report.fits["sql.duckdb"]
    assert fr.held_out == 15 and fr.used + fr.rejected == 45
    assert fr.error_before is not None and fr.error_after is not None
    assert fr.error_before > 0.5  # the old profile is ~3x off
    # the 6 calibration points of the other machine still pull (weight 1): error halves
    assert fr.error_after < 0.5 * fr.error_before
    # observations that count 10x: the new machine's costs
    heavy = refit(_profile(), _machine_b(60, 3), holdout=0.25, seed=5, weight=10.0)[1]
    heavy_fit = heavy.fits["sql.duckdb"]
    assert heavy_fit.error_after is not None and heavy_fit.error_after < 0.1
    assert report.error_after == pytest.approx(fr.error_after)
    engine = new["parameters"]["engines"]["duckdb"]
    assert engine["aggregate"] > DUCK["aggregate"]
    # same seed, same split: deterministic
    assert refit(_profile(), _machine_b(60, 3), holdout=0.25, seed=5)[1].to_json() == (
        report.to_json()
    )
    history = new["refit"]["history"]
    assert history[-1]["error_after"] == report.error_after


def test_observations_agreeing_with_the_profile_do_not_improve_it() -> None:
    """The held-out comparison is not rigged: same machine, no drop."""
    same = [
        Observation(o.fit, o.terms, predict({"engines": {"duckdb": DUCK}}, o.fit, o.terms))
        for o in _machine_b(40, 4)
    ]
    _, report = refit(_profile(), same, holdout=0.25)
    assert report.error_before is not None and report.error_before < 1e-9
    assert report.error_after is not None and report.error_after < 0.05


def test_refits_accumulate_and_unknown_fits_are_ignored() -> None:
    first, _ = refit(_profile(), _selects(3e-7), holdout=0.0)
    second, report = refit(first, [Observation("row.nothing", {"x": 1.0}, 1.0)], holdout=0.0)
    assert report.ignored == 1 and report.used == 0
    assert second["parameters"]["select"] == first["parameters"]["select"]
    assert len(second["refit"]["history"]) == 2 and len(second["refit"]["points"]) == 8


# -- the CLI ------------------------------------------------------------------------------------


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["calibrate", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not JSON"),
        ('{"hello": 1}', "neither run metrics"),
        ("[1, 2]", "not of 'hycq bench --json' records"),
        (None, "no such file"),
    ],
)
def test_bad_files_exit_2_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, message: str
) -> None:
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps(_profile()))
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    code, _, err = _cli(capsys, "--from", str(bad), "--profile", str(profile))
    assert code == 2
    assert err.startswith("error: --from ") and str(bad) in err and message in err
    assert "Traceback" not in err


def test_a_profile_given_to_from_and_a_missing_profile_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps(_profile()))
    code, _, err = _cli(capsys, "--from", str(profile), "--profile", str(profile))
    assert code == 2 and "is a calibration profile" in err
    monkeypatch.setenv("HYCQ_CALIBRATION", str(tmp_path / "none.json"))
    code, _, err = _cli(capsys, "--from", str(profile))
    assert code == 2 and "no calibration profile" in err and "run 'hycq calibrate' first" in err


def test_a_file_without_observations_is_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps(_profile()))
    empty = tmp_path / "m.json"
    empty.write_text(json.dumps({"tuples_in": 0, "operators": {}}))
    code, out, err = _cli(capsys, "--from", str(empty), "--profile", str(profile),
                          "--out", str(tmp_path / "o.json"))  # fmt: skip
    assert code == 0
    assert f"warning: {empty}: no usable observations" in err
    assert "0 observations" in out


def test_refit_from_a_real_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """End to end: a short hybrid run of Q2 writes metrics; refitting uses its row operators
    and its DuckDB group's slides; the new profile loads as the calibrated model."""
    from cost_models.calibrated import calibrated_model
    from engines import registry

    metrics = tmp_path / "m.json"
    root = Path(__file__).resolve().parents[3]
    query = str(root / "queries/smartplug/q2.sql")
    out_jsonl = str(tmp_path / "o.jsonl")
    # The hybrid plan: the AVG on the row engine, the join and count in DuckDB.
    placement = tmp_path / "placement.json"
    placement.write_text(json.dumps({"join1": "duckdb", "aggregate2": "duckdb"}))
    argv = ["run", query, "--duration", "20", "--rate", "3000", "--metrics", str(metrics),
            "--placement", str(placement)]  # fmt: skip
    code = main([*argv, "--output", out_jsonl])
    assert code == 0
    capsys.readouterr()
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps(_profile()))
    out_path = tmp_path / "new.json"
    code, out, err = _cli(capsys, "--from", str(metrics), "--profile", str(profile),
                          "--out", str(out_path))  # fmt: skip
    assert code == 0, err
    doc = json.loads(out_path.read_text())
    last = doc["refit"]["history"][-1]
    assert last["sources"] == [str(metrics)]
    assert {"row.select", "row.aggregate", "sql.duckdb"} <= set(last["fits"])
    assert last["fits"]["sql.duckdb"]["observations"] >= 15
    assert last["held_out"] > 0 and last["error_after"] is not None
    assert "overall" in out and "sql.duckdb" in out
    model = calibrated_model(out_path, registry.cost_defaults())
    assert model.select == doc["parameters"]["select"]
    duck = doc["parameters"]["engines"]["duckdb"]
    assert model.engines["duckdb"].aggregate == duck["aggregate"]
    assert duck != DUCK and last["fits"]["sql.duckdb"]["changed"]


def test_a_group_kept_incrementally_gives_no_sql_observations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Slides that read incrementally kept aggregates are no re-evaluations of the window, so
    the refit takes none of them as SQL observations, and says why."""
    import engines.mig.kept_aggregates
    import optimizer.ir.incremental
    from hycq.observations import extract

    monkeypatch.setattr(optimizer.ir.incremental, "MIN_ROWS", 0)
    monkeypatch.setattr(optimizer.ir.incremental, "CHANGE_RATIO", 0)
    # merge even where re-aggregating these small windows would be cheaper
    monkeypatch.setattr(engines.mig.kept_aggregates.IncrementalState, "_cheaper", lambda *_a: True)
    metrics = tmp_path / "m.json"
    root = Path(__file__).resolve().parents[3]
    argv = ["run", str(root / "queries/smartplug/q5.sql"), "--duration", "20", "--rate", "3000",
            "--placement", "column", "--metrics", str(metrics),
            "--output", str(tmp_path / "o.jsonl")]  # fmt: skip
    assert main(argv) == 0
    capsys.readouterr()
    got = extract(metrics)
    assert not [o for o in got.observations if o.fit.startswith("sql.")]
    assert any("kept incrementally" in s for s in got.skipped), got.skipped
