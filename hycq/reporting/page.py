"""The report as one self-contained HTML page (standard library string building).

Offline by construction: CSS is inline, graphics are inline SVG, there is no script, no
link, no image or font to fetch, and a Content-Security-Policy (``default-src 'none'``)
forbids the browser to load or run anything else even if some text slipped through. Every
piece of text from the query, the catalog, the plan or a measurement file goes through
:func:`hycq.reporting.svg.html_escape` (``html.escape`` with quotes).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from hycq.reporting.alternatives import off_row
from hycq.reporting.build import Report
from hycq.reporting.svg import (
    BOTTLENECK,
    PALETTE,
    Band,
    Marker,
    Panel,
    Series,
    engine_colors,
    engine_palette,
    fmt,
    html_escape,
    log_chart,
    plan_graph,
    time_chart,
)
from optimizer.ir.cost import Cost

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#222;
  background:#f7f7f5}
header{background:#23324a;color:#fff;padding:18px 28px}
header h1{margin:0 0 4px;font-size:22px}
header p{margin:2px 0;color:#d6deea}
nav{padding:8px 28px;background:#e9edf2;position:sticky;top:0;border-bottom:1px solid #ccd}
nav a{margin-right:16px;color:#23324a}
main{padding:8px 28px 40px;max-width:1400px}
section{background:#fff;border:1px solid #dde;border-radius:8px;padding:6px 18px 14px;
  margin:16px 0}
h2{font-size:18px;margin:12px 0 8px}
h3{font-size:15px;margin:14px 0 6px}
table{border-collapse:collapse;margin:6px 0 10px;font-size:13px}
th,td{border:1px solid #dde;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f0f2f6}
td.num{text-align:right;font-variant-numeric:tabular-nums}
pre{background:#f4f4f2;border:1px solid #e2e2dd;border-radius:6px;padding:8px 10px;
  overflow-x:auto;font-size:12.5px;white-space:pre-wrap;word-break:break-word}
.scroll{overflow-x:auto}
.ok{color:#1b7a2b;font-weight:600}.bad{color:#c62828;font-weight:600}
.note{color:#555;font-size:13px}
.big{font-size:20px;font-weight:600}
.pill{display:inline-block;padding:0 8px;border-radius:10px;border:1px solid;margin-right:6px}
.hotrow td:first-child{border-left:4px solid #c62828}
svg text{font:12px system-ui,sans-serif;fill:#222}
svg text.opid{font-weight:700;font-size:13px}
svg text.small,.small{font-size:11px}
svg text.hot{font-weight:700;font-size:11px}
svg text.glabel{font-weight:700;font-size:12px;text-decoration:underline}
.sqlbox{border-left:5px solid;padding-left:10px;margin:10px 0}
"""

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def render(r: Report) -> str:
    """The whole page."""
    sections = [
        _summary(r),
        _plan(r),
        _operators(r),
        _alternatives(r),
        _joins(r) if _has_joins(r) else "",
        _rates(r),
        _trace(r),
        _bench(r) if r.bench is not None else "",
        _run(r) if r.run is not None else "",
        _timeline(r) if _has_timeline(r) else "",
        _query(r),
    ]
    links = [
        ("summary", "Summary"),
        ("plan", "Plan"),
        ("operators", "Operators"),
        ("alternatives", "Alternatives"),
        *([("joins", "Joins")] if _has_joins(r) else []),
        ("rates", "Over rates"),
        ("trace", "Optimizer trace"),
        *([("bench", "Measured")] if r.bench is not None else []),
        *([("run", "Run")] if r.run is not None else []),
        *([("timeline", "Timeline")] if _has_timeline(r) else []),
        ("query", "Query"),
    ]
    info = r.info
    rate = f"{fmt(r.rate)} tuples/s" if r.rate else "per stream (catalog rates differ)"
    return "".join(
        [
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>hycq report: {html_escape(r.query_name)}</title>",
            f"<style>{CSS}</style></head><body>",
            f"<header><h1>Placement report: {html_escape(r.query_name)}</h1>",
            f"<p>rate {html_escape(rate)} · engines {html_escape(', '.join(info['engines']))}"
            f" · cost model {html_escape(info['cost_model'])}"
            f" · row core {html_escape(info['row_core'])} · feasibility check "
            f"{'on' if info['feasibility_check'] else 'off (--no-feasibility)'}</p>",
            f"<p>statistics: {html_escape(info['statistics']['source'])}</p></header>",
            "<nav>" + "".join(f'<a href="#{a}">{html_escape(t)}</a>' for a, t in links) + "</nav>",
            "<main>",
            *sections,
            '<p class="note">Written by <code>hycq report</code>; self-contained: no script, '
            "nothing loaded from the network.</p></main></body></html>\n",
        ]
    )


# -- helpers ------------------------------------------------------------------------------


def _table(head: Sequence[str], rows: Iterable[Sequence[str]], classes: Sequence[str] = ()) -> str:
    """A table; cells are already-escaped HTML. ``classes`` are per-row class names."""
    cls = list(classes)
    out = ['<div class="scroll"><table><thead><tr>']
    out += [f"<th>{h}</th>" for h in head]
    out.append("</tr></thead><tbody>")
    for k, row in enumerate(rows):
        c = f' class="{cls[k]}"' if k < len(cls) and cls[k] else ""
        out.append(f"<tr{c}>" + "".join(_cell(v) for v in row) + "</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def _cell(v: str) -> str:
    if v.startswith("\x00num"):
        return f'<td class="num">{v[4:]}</td>'
    return f"<td>{v}</td>"


def _n(x: float | None, unit: str = "") -> str:
    """A right-aligned number cell."""
    return "\x00num" + html_escape(fmt(x, unit))


def _g(x: float | None) -> str:
    return "\x00num" + ("—" if x is None else html_escape(f"{x:.4g}"))


def _feasible(ok: bool) -> str:
    return '<span class="ok">keeps up</span>' if ok else '<span class="bad">does not keep up</span>'


def _placement(p: Mapping[str, str]) -> str:
    """Operators off the row engine, by engine (everything else runs on the row engine)."""
    off = off_row(p)
    if not off:
        return "all on row"
    by: dict[str, list[str]] = {}
    for op_id, engine in off.items():
        by.setdefault(engine, []).append(op_id)
    return "; ".join(
        f'<span style="color:{engine_colors(eng)[1]}">{html_escape(eng)}</span>: '
        f"{html_escape(', '.join(ids))}"
        for eng, ids in by.items()
    )


def _cost(c: Cost) -> str:
    b, u = html_escape(f"{c.bottleneck:.4g}"), html_escape(f"{c.utilization:.4g}")
    return f"&lt;C_b = {b}, C_u = {u}&gt;"


def _section(anchor: str, title: str, *body: str) -> str:
    return f'<section id="{anchor}"><h2>{html_escape(title)}</h2>{"".join(body)}</section>'


# -- sections -----------------------------------------------------------------------------


def _summary(r: Report) -> str:
    limit = f"{fmt(r.max_rate)} tuples/s" if r.max_rate is not None else "none found (any rate)"
    rank = r.alternatives.rank
    rank_text = (
        f" It ranks #{rank} of all {r.alternatives.space} placements under Definition 6.1."
        if rank is not None
        else ""
    )
    return _section(
        "summary",
        "Summary",
        f"<p>Shown: <b>{html_escape(r.shown_label)}</b>, {_placement(r.placement)}."
        f"{html_escape(rank_text)}</p>",
        f'<p class="big">cost vector {_cost(r.cost)} · {_feasible(r.cost.feasible)} at '
        f"{html_escape(fmt(r.rate)) if r.rate else 'the catalog rates'}</p>",
        f"<p>Predicted to stop keeping up at <b>{html_escape(limit)}</b> "
        "(the rate where C_b reaches 1; "
        "<code>api.max_feasible_rate</code>).</p>",
        '<p class="note">C_b (bottleneck) is the largest utilization of one unit (an operator, '
        "a columnar group, or with the shared row core all row operators together); C_u sums "
        "every unit's utilization u. <b>Definition 6.1</b>: a plan P beats P′ when "
        "1° P keeps up (C_b ≤ 1) and P′ does not; 2° both keep up and C_u(P) &lt; C_u(P′); "
        "3° neither keeps up and C_b(P) &lt; C_b(P′). Ties go to the other measure, then to "
        "fewer operators off the row engine.</p>",
    )


def _plan(r: Report) -> str:
    legend = "".join(
        f'<span class="pill" style="background:{fill};border-color:{stroke}">'
        f"{html_escape(name)}</span>"
        for name, (fill, stroke) in engine_palette().items()
    )
    legend += (
        f'<span class="pill" style="border-color:{BOTTLENECK};color:{BOTTLENECK}">'
        "▲ bottleneck unit</span>"
        '<span class="pill" style="border-style:dashed">group = one SQL query (MIG)</span>'
    )
    graph = plan_graph(r.rows, [(g.id, g.engine, g.operators) for g in r.groups])
    sqls = []
    for g in r.groups:
        stroke = engine_colors(g.engine)[1]
        sqls.append(
            f'<div class="sqlbox" id="sql-{html_escape(g.id)}" style="border-color:{stroke}">'
            f"<h3>{html_escape(g.id)} on {html_escape(g.engine)}: "
            f"{html_escape(', '.join(g.operators))}</h3>"
            f'<p class="note">top {html_escape(g.top)} · u {html_escape(fmt(g.u))} · '
            f"{html_escape(fmt(1e3 * g.seconds_per_invocation))} ms per slide (predicted)</p>"
            f"<pre>{html_escape(g.sql)}</pre>" + _sql_columns(g.inputs, g.top, g.outputs) + "</div>"
        )
    if not sqls:
        sqls.append(
            '<p class="note">No migration candidates: everything runs on the row engine.</p>'
        )
    return _section(
        "plan",
        "Plan and placement",
        f"<p>{legend}</p>",
        f'<div class="scroll">{graph}</div>',
        "<h3>Migration candidates and their generated SQL</h3>",
        *sqls,
        "<h3>As text (the plan printer of <code>hycq explain</code>)</h3>",
        f"<pre>{html_escape(r.plan_text)}</pre>",
    )


def _sql_columns(inputs: Sequence[tuple[str, str]], top: str, outputs: Sequence[str]) -> str:
    """What the SQL's tables and positional columns (c0, c1, ...) stand for."""
    ins = "; ".join(f"{html_escape(t)} = output of <b>{html_escape(op)}</b>" for t, op in inputs)
    cols = ", ".join(f"c{k} = {html_escape(name)}" for k, name in enumerate(outputs))
    return (
        f'<p class="note">Inputs (columns c0, c1, ... of each operator\'s output): {ins}. '
        f"Result = output of <b>{html_escape(top)}</b>: {cols}.</p>"
    )


def _operators(r: Report) -> str:
    rows, classes = [], []
    for op in r.rows:
        lam_in = ", ".join(fmt(v) for v in op["lambda_in"]) or "—"
        columns = ", ".join(c["name"] for c in op["schema"])
        rows.append(
            [
                f"<b>{html_escape(op['id'])}</b>",
                html_escape(op["kind"]),
                f'<span style="color:{engine_colors(op["engine"])[1]}">'
                f"{html_escape(op['engine'])}</span>",
                html_escape(op["detail"]),
                html_escape(", ".join(op["inputs"])),
                "\x00num" + html_escape(lam_in),
                _n(op["lambda_out"]),
                _n(op["cardinality"]),
                _g(op["unit_cost"]),
                _g(op["u"]),
                html_escape(op["unit"]),
                '<span class="bad">▲ yes</span>' if op["bottleneck"] else "",
                html_escape(columns),
            ]
        )
        classes.append("hotrow" if op["bottleneck"] else "")
    return _section(
        "operators",
        "Operators",
        _table(
            [
                "id",
                "kind",
                "engine",
                "detail",
                "inputs",
                "λ in (/s)",
                "λ out (/s)",
                "window rows",
                "unit cost (s)",
                "u",
                "unit",
                "bottleneck",
                "output columns",
            ],
            rows,
            classes,
        ),
        '<p class="note">λ: tuples per second of source time (Eq. 6.1-6.3). Unit cost: seconds '
        "per input tuple on the row engine; for a group's members, seconds per invocation of "
        "the group (once per slide). u = utilization of the operator's unit (Eq. 6.4); a group "
        "is one unit (g&lt;k&gt;), and with the shared row core all row operators are one unit "
        "(row-core).</p>",
    )


def _alternatives(r: Report) -> str:
    a = r.alternatives
    rows = [
        [
            f"<b>shown ({html_escape(r.shown_label)})</b>",
            _placement(r.placement),
            _g(r.cost.bottleneck),
            _g(r.cost.utilization),
            _feasible(r.cost.feasible),
            _n(r.max_rate),
            "—",
        ]
    ]
    for alt in a.items:
        v = alt.verdict
        tone = "bad" if v.outcome == "wins" else ""
        verdict = (
            f'<span class="{tone}">{html_escape(v.outcome)}</span> on '
            f"<b>{html_escape(v.condition)}</b>: {html_escape(v.reason)}"
            if v.outcome != "same"
            else html_escape(v.reason)
        )
        rows.append(
            [
                html_escape(alt.name),
                _placement(alt.placement),
                _g(alt.cost.bottleneck),
                _g(alt.cost.utilization),
                _feasible(alt.cost.feasible),
                _n(alt.max_rate),
                verdict,
            ]
        )
    notes = [f"Next best: {html_escape(a.method)}."]
    notes += [f"Not possible: {html_escape(x)}." for x in a.impossible]
    return _section(
        "alternatives",
        "Alternatives and why they lost",
        _table(
            [
                "placement",
                "off the row engine",
                "C_b",
                "C_u",
                "at this rate",
                "max feasible rate (/s)",
                "against the shown plan (Definition 6.1)",
            ],
            rows,
        ),
        f'<p class="note">{" ".join(notes)} An alternative that <i>wins</i> would be preferred '
        "by the optimizer over the shown placement.</p>",
    )


def _rates(r: Report) -> str:
    s = r.sweep
    if s is None:
        return _section(
            "rates",
            "The plan over rates",
            '<p class="note">The input streams have different catalog rates; give --rate to '
            "see how the placement changes with the rate.</p>",
        )
    rows = [
        [
            _n(p.rate),
            _placement(p.placement),
            _cost(p.cost),
            _feasible(p.cost.feasible),
            _cost(p.shown_cost),
            _feasible(p.shown_cost.feasible),
        ]
        for p in s.points
    ]
    if s.switches:
        switches = (
            "<ul>"
            + "".join(
                f"<li>at about <b>{html_escape(fmt(w.rate))} tuples/s</b>: "
                f"{_placement(w.before)} → "
                f"{_placement(w.after)}</li>"
                for w in s.switches
            )
            + "</ul>"
        )
    else:
        switches = "<p>The best placement is the same at every rate in this range.</p>"
    return _section(
        "rates",
        "The plan over rates (predicted)",
        "<h3>Rates where the optimizer's placement switches</h3>",
        switches,
        _table(["rate (/s)", "best placement", "its cost", "", "shown plan's cost", ""], rows),
        '<p class="note">Phase Two re-run on the same Phase-One plan and statistics with '
        "every stream at the given rate; switch rates are bisected between grid rates.</p>",
    )


def _trace(r: Report) -> str:
    info = r.info
    pe, ms, search = info["plans_examined"], info["optimization_ms"], info["search"]
    mode = "exhaustive" if search["exhaustive"] else "pruned (section 6.3.4)"
    if search["decomposed"]:
        mode += ", decomposed into subplans of at most 15 R2R operators"
    space = r.alternatives.space
    not_costed = max(0, space - pe["phase_two"])
    orders = "; ".join(" ⋈ ".join(o) for o in info["join_orders"]) or "no joins"
    bound = (
        f"<h3>The plan as bound (before Phase One)</h3><pre>{html_escape(r.bound_text)}</pre>"
        if r.bound_text
        else '<p class="note">Phase One kept the bound join order.</p>'
    )
    rows = [
        ["bind (parse + bind)", _g(ms["bind"]), ""],
        ["sample statistics", _g(ms["sample"]), html_escape(info["statistics"]["source"])],
        [
            "Phase One (join order, all operators on row)",
            _g(ms["phase_one"]),
            html_escape(f"{pe['phase_one']} plans examined; join orders: {orders}"),
        ],
        [
            "Phase Two (placement)",
            _g(ms["phase_two"]),
            html_escape(
                f"{mode}: {pe['phase_two']} complete plans costed, "
                f"{pe['phase_two_partial']} partial plans built, of {space:,} placements "
                f"({not_costed:,} never costed: pruned)"
            ),
        ],
        ["optimization total", _g(ms["total"]), ""],
    ]
    return _section(
        "trace",
        "Optimizer trace",
        _table(["step", "ms", "what"], rows),
        "<h3>The Phase-One plan (the plan Phase Two places)</h3>",
        f"<pre>{html_escape(r.phase_one_text)}</pre>",
        bound,
    )


def _bench(r: Report) -> str:
    b = r.bench
    assert b is not None
    plans = b.plans
    colors = {p: PALETTE[k % len(PALETTE)] for k, p in enumerate(plans)}
    series = []
    for p in plans:
        recs = [x for x in b.records if x["plan"] == p]
        series.append(
            Series(
                f"{p} measured", colors[p], [(x["rate"], x["measured"]["throughput"]) for x in recs]
            )
        )
        predicted = [
            (x["rate"], x["rate"] / x["predicted"]["bottleneck"])
            for x in recs
            if x["predicted"]["bottleneck"] > 0
        ]
        series.append(Series(f"{p} predicted", colors[p], predicted, dashed=True))
    vlines = [
        (
            (w.rate_before * w.rate_after) ** 0.5,
            f"auto switches ({fmt(w.rate_before)}→{fmt(w.rate_after)}/s)",
        )
        for w in b.switches
    ]
    hlines = [(r.max_rate, "predicted limit of the shown plan")] if r.max_rate else []
    chart = log_chart(
        series,
        x_label="requested rate (tuples per event-second)",
        y_label="throughput (tuples/s)",
        diagonal="rate (keeps up above this line)",
        vlines=vlines,
        hlines=hlines,
    )
    rows = []
    for x in b.records:
        m, pr = x["measured"], x["predicted"]
        warm = x.get("warm_start", {})
        rows.append(
            [
                html_escape(x["plan"]),
                _n(x["rate"]),
                _placement(x.get("placement", {})),
                _g(pr["bottleneck"]),
                _g(pr["utilization"]),
                _feasible(bool(pr.get("feasible", pr["bottleneck"] <= 1))),
                _n(x["rate"] / pr["bottleneck"] if pr["bottleneck"] > 0 else None),
                _n(m["throughput"]),
                _feasible(m["throughput"] >= x["rate"]),
                html_escape("" if warm.get("complete", True) else "incomplete"),
                html_escape(x.get("cost_model", "")),
            ]
        )
    if b.switches:
        switches = (
            "<ul>"
            + "".join(
                f"<li>between {html_escape(fmt(w.rate_before))} and "
                f"{html_escape(fmt(w.rate_after))} tuples/s: "
                f"{_placement(w.before)} → {_placement(w.after)}</li>"
                for w in b.switches
            )
            + "</ul>"
        )
    else:
        switches = "<p>The <code>auto</code> plan is the same at every measured rate.</p>"
    return _section(
        "bench",
        "Measured against predicted throughput",
        f'<p class="note">From {html_escape(b.path)}: {len(b.records)} records. '
        "Predicted throughput "
        "is rate / C_b (the rate at which the bottleneck unit would be saturated if every u "
        "scaled with the rate); measured is the highest sustained input rate (hycq bench).</p>",
        f'<div class="scroll">{chart}</div>',
        "<h3>Rates where the chosen (auto) plan switches</h3>",
        switches,
        _table(
            [
                "plan",
                "rate (/s)",
                "off the row engine",
                "C_b",
                "C_u",
                "predicted",
                "predicted throughput (/s)",
                "measured throughput (/s)",
                "measured",
                "warm start",
                "cost model",
            ],
            rows,
        ),
    )


def _run(r: Report) -> str:
    m: dict[str, Any] = r.run or {}
    lat = m.get("latency_ms") or {}
    pred = m.get("predicted") or {}
    facts = [
        ["tuples in", _n(m.get("tuples_in"))],
        ["wall seconds", _g(m.get("wall_s"))],
        ["throughput (tuples/s)", _n(m.get("throughput"))],
        ["rate (tuples/s)", _n(m.get("rate"))],
        ["kept up", _feasible(bool(m.get("kept_up")))],
        [
            "predicted",
            f"{_cost(Cost.from_totals(pred['bottleneck'], pred['utilization']))} "
            f"{_feasible(bool(pred.get('feasible')))}"
            if pred
            else "—",
        ],
        ["results / instants", html_escape(f"{m.get('results', '—')} / {m.get('instants', '—')}")],
        ["latency p50 / p99 (ms)", html_escape(f"{fmt(lat.get('p50'))} / {fmt(lat.get('p99'))}")],
        ["peak RSS (MB)", _n(m.get("peak_rss_mb"))],
        ["dead-lettered rows", _n(m.get("dead_letter"))],
        ["pace", html_escape(m.get("pace", "—"))],
    ]
    units = [
        [
            html_escape(u.name),
            f'<span style="color:{engine_colors(u.engine)[1]}">{html_escape(u.engine)}</span>',
            html_escape(", ".join(u.operators)),
            _g(u.busy_s),
            _g(u.measured_u),
            _g(u.predicted_u),
            _g(u.measured_u / u.predicted_u) if u.measured_u is not None and u.predicted_u else "—",
        ]
        for u in r.run_units or []
    ]
    return _section(
        "run",
        "The run",
        _table(["metric", "value"], facts),
        "<h3>Per unit: measured against predicted utilization</h3>",
        _table(
            ["unit", "engine", "operators", "busy s", "measured u", "predicted u", "ratio"],
            units,
        ),
        '<p class="note">Measured u is busy seconds per event-second of input; at max pace '
        "the run is not throttled, so it measures cost, not load.</p>",
        _disorder(m.get("disorder")),
    )


def _join_ops(r: Report) -> list[tuple[str, dict[str, Any]]]:
    ops = (r.run or {}).get("operators") or {}
    return [(k, v["join"]) for k, v in ops.items() if isinstance(v, dict) and "join" in v]


def _has_joins(r: Report) -> bool:
    return bool(r.joins) or bool(_join_ops(r))


def _joins(r: Report) -> str:
    """Join implementations (docs/joins.md): the choice per chain against the alternatives'
    predicted costs, and, after a run, what each join did (probes, state, caches, JIT)."""
    body = []
    if r.joins:
        impls: list[str] = []
        for c in r.joins:
            for k in c["predicted_seconds_per_second"]:
                if k not in impls:
                    impls.append(k)
        rows = []
        for c in r.joins:
            pred = c["predicted_seconds_per_second"]
            rows.append(
                [
                    f"<code>{html_escape(c['root'])}</code>",
                    html_escape(", ".join(c["leaves"])),
                    f"<b>{html_escape(c['chosen'])}</b>",
                    *[_g(1e3 * pred[k]) if k in pred else "—" for k in impls],
                ]
            )
        body += [
            "<h3>Implementation per join chain</h3>",
            _table(
                ["chain root", "inputs", "chosen", *[f"{html_escape(k)} ms/s" for k in impls]],
                rows,
            ),
            '<p class="note">Predicted row-engine milliseconds of join work per second of '
            "input (optimizer/join_impl.py). <code>hycq run --join-impl auto</code> runs the "
            "choice; the default is the binary tree.</p>",
        ]
    ops = _join_ops(r)
    if ops:
        rows = []
        for op_id, j in ops:
            detail = []
            if j.get("impl") == "acaching":
                caches = j.get("caches") or []
                detail.append(
                    "caches: "
                    + (
                        "; ".join(
                            f"{c['segment']} key {c['key']}: {c['entries']} entries, hit rate "
                            f"{fmt(c['hit_rate'])}, benefit - cost {fmt(c['benefit_minus_cost'])}"
                            for c in caches
                        )
                        or "none"
                    )
                )
                detail.append(
                    f"re-selections {j.get('reselections', 0)}, reverted trials "
                    f"{j.get('reverts', 0)}"
                )
            if j.get("impl") == "jit":
                detail.append(
                    f"{j.get('role', '').strip() or 'unlinked'}: suspensions "
                    f"{j.get('suspensions', 0)}, resumptions {j.get('resumptions', 0)}, "
                    f"partials dropped {j.get('partials_dropped', 0)}, recomputed "
                    f"{j.get('partials_recomputed', 0)}"
                )
                if "jit_on" in j:
                    detail.append(
                        f"JIT {'on' if j['jit_on'] else 'off'} at the end, "
                        f"{j.get('switches', 0)} switches"
                    )
            if j.get("probe_orders"):
                detail.append(
                    "probe orders "
                    + " ".join("(" + ",".join(map(str, o)) + ")" for o in j["probe_orders"])
                )
            rows.append(
                [
                    f"<code>{html_escape(op_id)}</code>",
                    html_escape(str(j.get("impl", "tree"))),
                    _n(j.get("probes")),
                    _n(j.get("tuples_stored")),
                    _n(j.get("peak_tuples_stored")),
                    html_escape(" · ".join(detail)) or "—",
                ]
            )
        body += [
            "<h3>What each join did in the run</h3>",
            _table(["operator", "impl", "probes", "stored", "peak stored", "detail"], rows),
        ]
    return _section("joins", "Joins", *body)


def _disorder(d: Any) -> str:
    """The run's K-slack buffers (docs/disorder.md), when it had any."""
    if not isinstance(d, dict):
        return ""
    lat = d.get("latency_ms") or {}
    ev = d.get("event_latency_s") or {}
    rows = [
        [
            html_escape(name),
            _g(s.get("k_s")),
            _g(s.get("max_delay_s")),
            _n(s.get("buffered_peak")),
            _n(s.get("late_dropped")),
            _n(s.get("late_inserted")),
        ]
        for name, s in sorted((d.get("streams") or {}).items())
    ]
    head = (
        f"<h3>Disorder: --disorder {html_escape(str(d.get('policy')))}, late tuples "
        f"{html_escape(str(d.get('late')))}</h3>"
    )
    note = (
        '<p class="note">End-to-end result latency (arrival of the tuple that completed an '
        f"instant to its results), ms: p50 {html_escape(fmt(lat.get('p50')))}, p99 "
        f"{html_escape(fmt(lat.get('p99')))}, max {html_escape(fmt(lat.get('max')))}. "
        "Event-time latency (input that had to arrive before an instant could fire, beyond "
        f"it), s: p50 {html_escape(fmt(ev.get('p50')))}, p99 {html_escape(fmt(ev.get('p99')))}, "
        f"max {html_escape(fmt(ev.get('max')))}.</p>"
    )
    table = _table(
        ["stream", "K (s)", "max delay (s)", "peak buffered", "late dropped", "late inserted"],
        rows,
    )
    return head + table + note


def _query(r: Report) -> str:
    return _section("query", "Query", f"<pre>{html_escape(r.query_text)}</pre>")


# -- the run over time --------------------------------------------------------------------


def _has_timeline(r: Report) -> bool:
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
        _placement({str(k): str(v) for k, v in placement.items()})
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


def _timeline(r: Report) -> str:
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
                _n(at),
                _asked(rec),
                f'<b>{html_escape(strategy)}</b><br><span class="small">'
                f"{html_escape(rec.get('strategy_choice', ''))}</span>",
                _label_html(rec.get("from")),
                _label_html(rec.get("to")),
                _n(_num(rec.get("duration_ms"))),
                _n(_num(rec.get("output_gap_ms"))),
                html_escape(" / ".join("—" if v is None else str(v) for v in moved)),
                _n(_num(rec.get("tuples_replayed"))),
                _n(switched),
                _n(dropped),
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
            _table(
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
            _table(
                ["plan", "from (s)", "join order; placement"],
                [[html_escape(str(j)), _n(starts[j]), _label_html(p)] for j, p in enumerate(plans)],
            ),
        ]
    decisions = m.get("adapt_decisions")
    if isinstance(decisions, list):
        body += ["<h3>Adaptive decisions (--adapt)</h3>", _decisions(decisions, clock)]
    return _section("timeline", "The run over time", *body)


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
                _n(f["n"]),
                f'<span class="{tone}">{html_escape(verdict)}</span>',
                html_escape(why),
                html_escape(f"{fmt(f['cost'][0])} → {fmt(f['cost'][1])}"),
            ]
        )
    return _table(["event time", "checks", "decision", "why", "C_u running → best (last)"], rows)
