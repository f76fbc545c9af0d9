"""The report's "run over time" section: the timeline of a run (throughput, latency, lag,
the plans that ran and the migrations and decisions between them) as inline SVG charts and
tables."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hycq.reporting.alternatives import off_row
from hycq.reporting.build import Report
from hycq.reporting.html import (
    num_html,
    placement_html,
    section_html,
    table_html,
)
from hycq.reporting.svg import (
    PALETTE,
    Band,
    Marker,
    Panel,
    Series,
    fmt,
    html_escape,
    time_chart,
)

# -- the run over time --------------------------------------------------------------------


def has_timeline(r: Report) -> bool:
    tl = (r.run or {}).get("timeline")
    return isinstance(tl, dict) and bool(tl.get("entries"))


def _num(x: object) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None


class _Clock:
    """Ticks of the query's time base to event-seconds after the run's first tuple."""

    def __init__(self, timeline: Mapping[str, Any]) -> None:
        self.origin = _num(timeline.get("origin"))
        self.tps = _num(timeline.get("ticks_per_second")) or 1.0

    def seconds(self, tick: object) -> float | None:
        t = _num(tick)
        return None if t is None or self.origin is None else (t - self.origin) / self.tps


def _order_text(label: object) -> str:
    """A plan label's join order (``r ⋈ s ⋈ t``; chains separated by ``;``), escaped."""
    order = label.get("join_order") if isinstance(label, Mapping) else None
    if not order:
        return "—"
    chains = order if isinstance(order[0], list | tuple) else [order]
    return html_escape("; ".join(" ⋈ ".join(str(a) for a in c) for c in chains))


def _label_html(label: object) -> str:
    placement = label.get("placement") if isinstance(label, Mapping) else None
    where = (
        placement_html({str(k): str(v) for k, v in placement.items()})
        if isinstance(placement, Mapping)
        else "—"
    )
    return f'{_order_text(label)}<br><span class="small">{where}</span>'


def _label_plain(label: object) -> str:
    """A plan label as plain text (for tooltips; escaped where it is placed)."""
    if not isinstance(label, Mapping):
        return "?"
    order = label.get("join_order") or []
    chains = order if order and isinstance(order[0], list | tuple) else [order]
    text = "; ".join(",".join(str(a) for a in c) for c in chains) or "?"
    off = off_row({str(k): str(v) for k, v in (label.get("placement") or {}).items()})
    return text + (" [" + ", ".join(f"{k}: {v}" for k, v in off.items()) + "]" if off else "")


def _s(x: float | None) -> str:
    return "—" if x is None else f"{x:g} s"


def _asked(rec: Mapping[str, Any]) -> str:
    """Who asked for a migration, and why (escaped HTML)."""
    reason = rec.get("reason")
    kind = reason.get("kind") if isinstance(reason, Mapping) else None
    if rec.get("by") == "controller" or kind == "drift":
        assert isinstance(reason, Mapping)
        drifted = ", ".join(str(d) for d in reason.get("drifted") or []) or "—"
        cost = reason.get("cost") or {}
        running = (cost.get("running") or {}) if isinstance(cost, Mapping) else {}
        new = (cost.get("new") or {}) if isinstance(cost, Mapping) else {}
        return html_escape(
            f"--adapt ({reason.get('trigger')}): drifted {drifted}; C_u "
            f"{fmt(_num(running.get('utilization')))} → {fmt(_num(new.get('utilization')))}"
        )
    text = str(rec.get("source") or kind or "—")
    if rec.get("deferred"):
        text += f" (asked at {_s(_num(rec.get('requested_at_s')))}, deferred)"
    return html_escape(text)


def timeline_section(r: Report) -> str:
    m: dict[str, Any] = r.run or {}
    tl: dict[str, Any] = m["timeline"]
    clock = _Clock(tl)
    res = _num(tl.get("resolution_s")) or 1.0
    entries = [e for e in tl["entries"] if isinstance(e, Mapping)]
    x_max = max((_num(e.get("t_s")) or 0.0) + res for e in entries)
    records = [x for x in m.get("migrations") or [] if isinstance(x, Mapping)]
    plans = [p for p in m.get("plans") or [] if isinstance(p, Mapping)]
    for rec in records:
        at = _num(rec.get("at_s"))
        if at is not None:
            x_max = max(x_max, at)

    def mid(e: Mapping[str, Any]) -> float:
        return (_num(e.get("t_s")) or 0.0) + res / 2

    def lat(e: Mapping[str, Any], key: str) -> float | None:
        v = e.get("latency_ms")
        return _num(v.get(key)) if isinstance(v, Mapping) else None

    def points(values: list[tuple[float, float | None]]) -> list[tuple[float, float]]:
        return [(x, y) for x, y in values if y is not None]

    panels = [
        Panel(
            "throughput (tuples / wall s)",
            [
                Series(
                    "throughput",
                    PALETTE[0],
                    points([(mid(e), _num(e.get("throughput"))) for e in entries]),
                )
            ],
        ),
        Panel(
            "result latency (ms, log)",
            [
                Series(
                    "latency p50", PALETTE[1], points([(mid(e), lat(e, "p50")) for e in entries])
                ),
                Series(
                    "latency max",
                    PALETTE[3],
                    points([(mid(e), lat(e, "max")) for e in entries]),
                    dashed=True,
                ),
            ],
            log=True,
        ),
    ]
    markers = []
    rows = []
    for k, rec in enumerate(records, 1):
        # at_s is None for a migration before the first instant fired: mark the time asked
        at = _num(rec.get("at_s"))
        if at is None and rec.get("happened", True):
            at = _num(rec.get("requested_at_s"))
        switched = clock.seconds(rec.get("switched_at"))
        dropped = clock.seconds(rec.get("old_plan_dropped_at"))
        strategy = str(rec.get("strategy"))
        happened = bool(rec.get("happened", True))
        done = bool(rec.get("completed", True))
        state = "completed" if done else ("never happened" if not happened else "not completed")
        if rec.get("note"):
            state += f": {rec.get('note')}"
        if happened and at is not None:
            tip = (
                f"M{k} at {_s(at)}: {strategy}\n"
                f"{_label_plain(rec.get('from'))} -> {_label_plain(rec.get('to'))}\n"
                f"duration {fmt(_num(rec.get('duration_ms')))} ms, output gap "
                f"{fmt(_num(rec.get('output_gap_ms')))} ms, old plan dropped at {_s(dropped)}"
                + ("" if done else f"\n{state}")
            )
            markers.append(Marker(at, f"M{k} {strategy}", tip, until=switched))
        moved = [rec.get("states_moved"), rec.get("states_recomputed"), rec.get("keys_completed")]
        rows.append(
            [
                f"<b>M{k}</b>",
                num_html(at),
                _asked(rec),
                f'<b>{html_escape(strategy)}</b><br><span class="small">'
                f"{html_escape(rec.get('strategy_choice', ''))}</span>",
                _label_html(rec.get("from")),
                _label_html(rec.get("to")),
                num_html(_num(rec.get("duration_ms"))),
                num_html(_num(rec.get("output_gap_ms"))),
                html_escape(" / ".join("—" if v is None else str(v) for v in moved)),
                num_html(_num(rec.get("tuples_replayed"))),
                num_html(switched),
                num_html(dropped),
                html_escape(state),
            ]
        )
    bands = []
    starts = [clock.seconds(p.get("from_instant")) or 0.0 for p in plans]
    for j, p in enumerate(plans):
        end = starts[j + 1] if j + 1 < len(plans) else x_max
        bands.append(
            Band(starts[j], end, PALETTE[(j + 4) % len(PALETTE)], f"plan {j}: {_label_plain(p)}")
        )
    chart = time_chart(
        panels,
        x_label="event-seconds after the first tuple",
        x_max=x_max,
        gap=1.5 * res,
        markers=markers,
        bands=bands if len(plans) > 1 else [],
    )
    body = [
        '<p class="note">Per '
        + ("event-second" if res == 1 else html_escape(f"{res:g} event-seconds"))
        + " of input (metrics <code>timeline</code>, coarsened on long runs): throughput is the "
        "tuples of that second over the wall time spent on them; latency is the wall time "
        "from the call that fired an instant to its emission (p50 and max over the instants "
        "of the second). Migrations are marked M1, M2, ... at the instant they began, shaded "
        "until the new plan took over; hover for details."
        + (" The strip under the panels is the plan in charge." if len(plans) > 1 else "")
        + "</p>",
        f'<div class="scroll">{chart}</div>',
    ]
    if records:
        body += [
            "<h3>Migrations</h3>",
            table_html(
                [
                    "#",
                    "at (s)",
                    "asked by",
                    "strategy",
                    "from (join order; placement)",
                    "to",
                    "duration (ms)",
                    "output gap (ms)",
                    "states moved / recomputed / keys completed",
                    "tuples replayed",
                    "switched at (s)",
                    "old plan dropped at (s)",
                    "outcome",
                ],
                rows,
            ),
        ]
    if len(plans) > 1:
        body += [
            "<h3>Plans in charge</h3>",
            table_html(
                ["plan", "from (s)", "join order; placement"],
                [
                    [html_escape(str(j)), num_html(starts[j]), _label_html(p)]
                    for j, p in enumerate(plans)
                ],
            ),
        ]
    decisions = m.get("adapt_decisions")
    if isinstance(decisions, list):
        body += ["<h3>Adaptive decisions (--adapt)</h3>", _decisions(decisions, clock)]
    return section_html("timeline", "The run over time", *body)


def _decisions(decisions: list[Any], clock: _Clock) -> str:
    """The controller's checks, consecutive checks with the same verdict and reason folded
    into one row (a long run checks hundreds of times)."""
    folded: list[dict[str, Any]] = []
    for d in decisions:
        if not isinstance(d, Mapping):
            continue
        verdict = str(d.get("decision", "?"))
        why = str(d.get("why") or (f"trigger: {d.get('trigger')}" if d.get("trigger") else ""))
        key = (verdict, why)
        t = clock.seconds(d.get("at"))
        cost = tuple(
            _num(c.get("utilization")) if isinstance(c := d.get(side), Mapping) else None
            for side in ("running", "best")
        )
        if folded and folded[-1]["key"] == key and verdict == "stay":
            folded[-1].update(last=t, cost=cost)
            folded[-1]["n"] += 1
        else:
            folded.append({"key": key, "first": t, "last": t, "n": 1, "cost": cost})
    if not folded:
        return '<p class="note">No check was made (the run ended first).</p>'
    rows = []
    for f in folded:
        verdict, why = f["key"]
        tone = "bad" if verdict == "migrate" else ""
        span = _s(f["first"]) if f["n"] == 1 else f"{_s(f['first'])} – {_s(f['last'])}"
        rows.append(
            [
                html_escape(span),
                num_html(f["n"]),
                f'<span class="{tone}">{html_escape(verdict)}</span>',
                html_escape(why),
                html_escape(f"{fmt(f['cost'][0])} → {fmt(f['cost'][1])}"),
            ]
        )
    return table_html(
        ["event time", "checks", "decision", "why", "C_u running → best (last)"], rows
    )
