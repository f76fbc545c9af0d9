"""The report as one self-contained HTML page (standard library string building).

Offline by construction: CSS is inline, graphics are inline SVG, there is no script, no
link, no image or font to fetch, and a Content-Security-Policy (``default-src 'none'``)
forbids the browser to load or run anything else even if some text slipped through. Every
piece of text from the query, the catalog, the plan or a measurement file goes through
:func:`hycq.reporting.svg.html_escape` (``html.escape`` with quotes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hycq.reporting.build import Report
from hycq.reporting.html import (
    cost_html,
    feasible_html,
    g_html,
    num_html,
    placement_html,
    section_html,
    table_html,
)
from hycq.reporting.svg import (
    BOTTLENECK,
    PALETTE,
    Series,
    engine_colors,
    engine_palette,
    fmt,
    html_escape,
    log_chart,
    plan_graph,
)
from hycq.reporting.timeline_html import (
    has_timeline,
    timeline_section,
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
        timeline_section(r) if has_timeline(r) else "",
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
        *([("timeline", "Timeline")] if has_timeline(r) else []),
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


def _summary(r: Report) -> str:
    limit = f"{fmt(r.max_rate)} tuples/s" if r.max_rate is not None else "none found (any rate)"
    rank = r.alternatives.rank
    rank_text = (
        f" It ranks #{rank} of all {r.alternatives.space} placements under Definition 6.1."
        if rank is not None
        else ""
    )
    return section_html(
        "summary",
        "Summary",
        f"<p>Shown: <b>{html_escape(r.shown_label)}</b>, {placement_html(r.placement)}."
        f"{html_escape(rank_text)}</p>",
        f'<p class="big">cost vector {cost_html(r.cost)} · {feasible_html(r.cost.feasible)} at '
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
    return section_html(
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
                num_html(op["lambda_out"]),
                num_html(op["cardinality"]),
                g_html(op["unit_cost"]),
                g_html(op["u"]),
                html_escape(op["unit"]),
                '<span class="bad">▲ yes</span>' if op["bottleneck"] else "",
                html_escape(columns),
            ]
        )
        classes.append("hotrow" if op["bottleneck"] else "")
    return section_html(
        "operators",
        "Operators",
        table_html(
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
            placement_html(r.placement),
            g_html(r.cost.bottleneck),
            g_html(r.cost.utilization),
            feasible_html(r.cost.feasible),
            num_html(r.max_rate),
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
                placement_html(alt.placement),
                g_html(alt.cost.bottleneck),
                g_html(alt.cost.utilization),
                feasible_html(alt.cost.feasible),
                num_html(alt.max_rate),
                verdict,
            ]
        )
    notes = [f"Next best: {html_escape(a.method)}."]
    notes += [f"Not possible: {html_escape(x)}." for x in a.impossible]
    return section_html(
        "alternatives",
        "Alternatives and why they lost",
        table_html(
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
        return section_html(
            "rates",
            "The plan over rates",
            '<p class="note">The input streams have different catalog rates; give --rate to '
            "see how the placement changes with the rate.</p>",
        )
    rows = [
        [
            num_html(p.rate),
            placement_html(p.placement),
            cost_html(p.cost),
            feasible_html(p.cost.feasible),
            cost_html(p.shown_cost),
            feasible_html(p.shown_cost.feasible),
        ]
        for p in s.points
    ]
    if s.switches:
        switches = (
            "<ul>"
            + "".join(
                f"<li>at about <b>{html_escape(fmt(w.rate))} tuples/s</b>: "
                f"{placement_html(w.before)} → "
                f"{placement_html(w.after)}</li>"
                for w in s.switches
            )
            + "</ul>"
        )
    else:
        switches = "<p>The best placement is the same at every rate in this range.</p>"
    return section_html(
        "rates",
        "The plan over rates (predicted)",
        "<h3>Rates where the optimizer's placement switches</h3>",
        switches,
        table_html(["rate (/s)", "best placement", "its cost", "", "shown plan's cost", ""], rows),
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
        ["bind (parse + bind)", g_html(ms["bind"]), ""],
        ["sample statistics", g_html(ms["sample"]), html_escape(info["statistics"]["source"])],
        [
            "Phase One (join order, all operators on row)",
            g_html(ms["phase_one"]),
            html_escape(f"{pe['phase_one']} plans examined; join orders: {orders}"),
        ],
        [
            "Phase Two (placement)",
            g_html(ms["phase_two"]),
            html_escape(
                f"{mode}: {pe['phase_two']} complete plans costed, "
                f"{pe['phase_two_partial']} partial plans built, of {space:,} placements "
                f"({not_costed:,} never costed: pruned)"
            ),
        ],
        ["optimization total", g_html(ms["total"]), ""],
    ]
    return section_html(
        "trace",
        "Optimizer trace",
        table_html(["step", "ms", "what"], rows),
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
                num_html(x["rate"]),
                placement_html(x.get("placement", {})),
                g_html(pr["bottleneck"]),
                g_html(pr["utilization"]),
                feasible_html(bool(pr.get("feasible", pr["bottleneck"] <= 1))),
                num_html(x["rate"] / pr["bottleneck"] if pr["bottleneck"] > 0 else None),
                num_html(m["throughput"]),
                feasible_html(m["throughput"] >= x["rate"]),
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
                f"{placement_html(w.before)} → {placement_html(w.after)}</li>"
                for w in b.switches
            )
            + "</ul>"
        )
    else:
        switches = "<p>The <code>auto</code> plan is the same at every measured rate.</p>"
    return section_html(
        "bench",
        "Measured against predicted throughput",
        f'<p class="note">From {html_escape(b.path)}: {len(b.records)} records. '
        "Predicted throughput "
        "is rate / C_b (the rate at which the bottleneck unit would be saturated if every u "
        "scaled with the rate); measured is the highest sustained input rate (hycq bench).</p>",
        f'<div class="scroll">{chart}</div>',
        "<h3>Rates where the chosen (auto) plan switches</h3>",
        switches,
        table_html(
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
        ["tuples in", num_html(m.get("tuples_in"))],
        ["wall seconds", g_html(m.get("wall_s"))],
        ["throughput (tuples/s)", num_html(m.get("throughput"))],
        ["rate (tuples/s)", num_html(m.get("rate"))],
        ["kept up", feasible_html(bool(m.get("kept_up")))],
        [
            "predicted",
            f"{cost_html(Cost.from_totals(pred['bottleneck'], pred['utilization']))} "
            f"{feasible_html(bool(pred.get('feasible')))}"
            if pred
            else "—",
        ],
        ["results / instants", html_escape(f"{m.get('results', '—')} / {m.get('instants', '—')}")],
        ["latency p50 / p99 (ms)", html_escape(f"{fmt(lat.get('p50'))} / {fmt(lat.get('p99'))}")],
        ["peak RSS (MB)", num_html(m.get("peak_rss_mb"))],
        ["dead-lettered rows", num_html(m.get("dead_letter"))],
        ["pace", html_escape(m.get("pace", "—"))],
    ]
    units = [
        [
            html_escape(u.name),
            f'<span style="color:{engine_colors(u.engine)[1]}">{html_escape(u.engine)}</span>',
            html_escape(", ".join(u.operators)),
            g_html(u.busy_s),
            g_html(u.measured_u),
            g_html(u.predicted_u),
            g_html(u.measured_u / u.predicted_u)
            if u.measured_u is not None and u.predicted_u
            else "—",
        ]
        for u in r.run_units or []
    ]
    return section_html(
        "run",
        "The run",
        table_html(["metric", "value"], facts),
        "<h3>Per unit: measured against predicted utilization</h3>",
        table_html(
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
                    *[g_html(1e3 * pred[k]) if k in pred else "—" for k in impls],
                ]
            )
        body += [
            "<h3>Implementation per join chain</h3>",
            table_html(
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
                    num_html(j.get("probes")),
                    num_html(j.get("tuples_stored")),
                    num_html(j.get("peak_tuples_stored")),
                    html_escape(" · ".join(detail)) or "—",
                ]
            )
        body += [
            "<h3>What each join did in the run</h3>",
            table_html(["operator", "impl", "probes", "stored", "peak stored", "detail"], rows),
        ]
    return section_html("joins", "Joins", *body)


def _disorder(d: Any) -> str:
    """The run's K-slack buffers (docs/disorder.md), when it had any."""
    if not isinstance(d, dict):
        return ""
    lat = d.get("latency_ms") or {}
    ev = d.get("event_latency_s") or {}
    rows = [
        [
            html_escape(name),
            g_html(s.get("k_s")),
            g_html(s.get("max_delay_s")),
            num_html(s.get("buffered_peak")),
            num_html(s.get("late_dropped")),
            num_html(s.get("late_inserted")),
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
    table = table_html(
        ["stream", "K (s)", "max delay (s)", "peak buffered", "late dropped", "late inserted"],
        rows,
    )
    return head + table + note


def _query(r: Report) -> str:
    return section_html("query", "Query", f"<pre>{html_escape(r.query_text)}</pre>")
