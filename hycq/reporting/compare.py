"""Why one placement beats another: Definition 6.1, spelled out.

Phase Two ranks complete plans by ``optimizer.ir.cost.sort_key`` and, among equal keys, by
the number of operators off the row engine. :func:`compare` applies exactly that order and
says which condition of Definition 6.1 decided it:

* 1° the shown plan keeps up (``C_b <= 1``) and the other does not (or the reverse);
* 2° both keep up: the lower total utilization ``C_u`` wins;
* 3° neither keeps up: the lower bottleneck ``C_b`` (higher throughput) wins;
* with ``--no-feasibility`` (section 6.4.3) only ``C_u`` counts;
* equal on that measure: the tie-breaks of ``sort_key`` (the other measure) and of Phase Two
  (fewer operators off the row engine).

Example:
    >>> from optimizer.ir.cost import Cost
    >>> v = compare(Cost.unit(0.5), 0, Cost.unit(2.0), 0)
    >>> v.outcome, v.condition
    ('loses', '1°')
    >>> compare(Cost.unit(0.5), 1, Cost.unit(0.5), 0).outcome
    'wins'
"""

from __future__ import annotations

from dataclasses import dataclass

from optimizer.ir.cost import Cost, sort_key


@dataclass(frozen=True)
class Verdict:
    """How an alternative placement compares with the shown one."""

    outcome: str
    """``loses``, ``wins`` (the alternative would be preferred), ``ties``, or ``same`` (it is
    the shown placement)."""
    condition: str
    """The deciding rule: ``1°``, ``2°``, ``3°``, ``C_u only`` or ``tie-break``."""
    reason: str
    """One sentence with the numbers."""


def _g(x: float) -> str:
    return f"{x:.4g}"


def compare(
    shown: Cost,
    shown_columnar: int,
    other: Cost,
    other_columnar: int,
    utilization_only: bool = False,
) -> Verdict:
    """Compare ``other`` with ``shown`` as Phase Two does (see the module docstring).

    ``*_columnar`` count the operators each placement puts off the row engine.
    """
    ks = (*sort_key(shown, utilization_only), float(shown_columnar))
    ko = (*sort_key(other, utilization_only), float(other_columnar))
    outcome = "loses" if ko > ks else "wins" if ko < ks else "ties"
    sb, ob, su, ou = shown.bottleneck, other.bottleneck, shown.utilization, other.utilization
    if utilization_only:
        if ou != su:
            more = "higher" if ou > su else "lower"
            return Verdict(
                outcome,
                "C_u only",
                f"{more} total utilization C_u = {_g(ou)} vs {_g(su)} "
                "(feasibility not checked, --no-feasibility)",
            )
    elif shown.feasible != other.feasible:
        if other.feasible:
            why = f"keeps up (C_b = {_g(ob)} <= 1) where the shown plan does not ({_g(sb)} > 1)"
        else:
            why = f"infeasible at this rate: C_b = {_g(ob)} > 1, the shown plan keeps up"
        return Verdict(outcome, "1°", why)
    elif shown.feasible:
        if ou != su:
            more = "higher" if ou > su else "lower"
            return Verdict(
                outcome,
                "2°",
                f"both keep up; {more} total utilization C_u = {_g(ou)} vs {_g(su)}",
            )
    elif ob != sb:
        more = "higher" if ob > sb else "lower"
        return Verdict(
            outcome,
            "3°",
            f"neither keeps up; {more} bottleneck C_b = {_g(ob)} vs {_g(sb)}",
        )
    return _tie(outcome, shown, shown_columnar, other, other_columnar, utilization_only)


def _tie(
    outcome: str,
    shown: Cost,
    shown_columnar: int,
    other: Cost,
    other_columnar: int,
    utilization_only: bool,
) -> Verdict:
    """Equal on the measure Definition 6.1 uses: the tie-breaks decide."""
    measure = "C_u" if utilization_only or shown.feasible else "C_b"
    second = "C_b" if measure == "C_u" else "C_u"
    s2 = shown.bottleneck if second == "C_b" else shown.utilization
    o2 = other.bottleneck if second == "C_b" else other.utilization
    if s2 != o2:
        more = "higher" if o2 > s2 else "lower"
        return Verdict(
            outcome,
            "tie-break",
            f"equal {measure} (Definition 6.1 ties); {more} {second} = {_g(o2)} vs {_g(s2)}",
        )
    if other_columnar != shown_columnar:
        more = "more" if other_columnar > shown_columnar else "fewer"
        return Verdict(
            outcome,
            "tie-break",
            f"equal cost vector; {more} operators off the row engine "
            f"({other_columnar} vs {shown_columnar}), and Phase Two prefers fewer",
        )
    return Verdict("ties", "tie", "same cost vector and as many operators off the row engine")
