"""Inline SVG drawn by hand: the plan graph, a log-log throughput chart and the run's timeline.

No JavaScript and nothing fetched: every element is plain SVG inside the HTML page, every
text is escaped, and tooltips are SVG ``<title>`` elements (shown by browsers on hover).

The plan graph is layered: ``networkx.topological_generations`` puts every operator one
layer above its highest input, so sources are at the bottom and the sink at the top (as the
text printer reads from the top). Within a layer an operator sits above the mean position of
its inputs, pushed right where it would overlap a neighbour. Each group (migration candidate)
gets a dashed rounded rectangle around its members, labelled with its id and linked to its
SQL further down the page.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

import networkx as nx

#: (fill, stroke) of an engine that declares no colours.
UNKNOWN_ENGINE_COLORS = ("#eeeeee", "#555555")
BOTTLENECK = "#c62828"
NODE_W, NODE_H = 190, 76
GAP_X, LAYER_H, MARGIN = 36, 128, 24


def html_escape(text: object) -> str:
    """``text`` escaped for HTML text and attribute values (quotes included)."""
    return escape(str(text), quote=True)


def engine_palette() -> dict[str, tuple[str, str]]:
    """(fill, stroke) per registered engine, as each engine's registration declares them."""
    from engines import registry

    return registry.colours()


def engine_colors(engine: str) -> tuple[str, str]:
    return engine_palette().get(engine, UNKNOWN_ENGINE_COLORS)


def fmt(x: float | None, unit: str = "") -> str:
    """A short number: ``—`` for unknown, thousands separators for large ones."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    if math.isinf(x):
        return "∞"
    text = f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.3g}"
    return text + unit


@dataclass(frozen=True)
class _Box:
    x: float
    y: float


def _layout(rows: Sequence[Mapping[str, Any]]) -> tuple[dict[str, _Box], float, float]:
    """Top-left corner of every operator's box, and the drawing's width and height."""
    graph = nx.DiGraph()
    for r in rows:
        graph.add_node(r["id"])
        for i in r["inputs"]:
            graph.add_edge(i, r["id"])
    order = {r["id"]: k for k, r in enumerate(rows)}
    layers = [sorted(g, key=order.__getitem__) for g in nx.topological_generations(graph)]
    x: dict[str, float] = {}
    for depth, layer in enumerate(layers):
        if depth == 0:
            wanted = {n: k * (NODE_W + GAP_X) for k, n in enumerate(layer)}
        else:
            wanted = {
                n: sum(x[i] for i in graph.predecessors(n)) / max(1, graph.in_degree(n))
                for n in layer
            }
        last = -math.inf
        for n in sorted(layer, key=lambda n: (wanted[n], order[n])):
            x[n] = max(wanted[n], last + NODE_W + GAP_X)
            last = x[n]
    shift = MARGIN - min(x.values(), default=0.0)
    top = MARGIN + 22  # room for group labels
    boxes = {
        n: _Box(x[n] + shift, top + (len(layers) - 1 - depth) * LAYER_H)
        for depth, layer in enumerate(layers)
        for n in layer
    }
    width = max((b.x for b in boxes.values()), default=0.0) + NODE_W + MARGIN
    height = top + len(layers) * LAYER_H - (LAYER_H - NODE_H) + MARGIN
    return boxes, width, height


def plan_graph(
    rows: Sequence[Mapping[str, Any]], groups: Sequence[tuple[str, str, Sequence[str]]]
) -> str:
    """The plan as an SVG graph. ``rows`` are operator rows (id, kind, engine, inputs, u,
    unit, lambda_in, lambda_out, bottleneck, detail); ``groups`` are (id, engine, members)."""
    boxes, width, height = _layout(rows)
    out = [
        f'<svg class="plan" role="img" '
        f'width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
        'aria-label="operator graph">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" '
        'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
        '<path d="M0,0 L10,5 L0,10 z" fill="#666"/></marker></defs>',
    ]
    inputs = {r["id"]: list(r["inputs"]) for r in rows}
    for gid, engine, members in groups:
        out.append(_group(gid, engine, [m for m in members if m in boxes], boxes, inputs))
    for r in rows:
        for i in r["inputs"]:
            a, b = boxes[i], boxes[r["id"]]
            x1, y1 = a.x + NODE_W / 2, a.y
            x2, y2 = b.x + NODE_W / 2, b.y + NODE_H
            my = (y1 + y2) / 2
            out.append(
                f'<path class="edge" d="M{x1:.1f},{y1:.1f} C{x1:.1f},{my:.1f} {x2:.1f},{my:.1f} '
                f'{x2:.1f},{y2 + 2:.1f}" fill="none" stroke="#888" stroke-width="1.4" '
                'marker-end="url(#arrow)"/>'
            )
    out.extend(_node(r, boxes[r["id"]]) for r in rows)
    out.append("</svg>")
    return "".join(out)


def _group(
    gid: str,
    engine: str,
    members: Sequence[str],
    boxes: Mapping[str, _Box],
    inputs: Mapping[str, Sequence[str]],
) -> str:
    """A group's outline: the union of its members' padded boxes and of a band along each
    edge between two members, so operators of other engines are never inside it.

    The dashed outline of a union is drawn by stroking every shape twice as wide as wanted
    and masking out the inside of all shapes: only the union's boundary remains.
    """
    if not members:
        return ""
    pad, inset = 10, 40
    shapes = [
        f'<rect x="{boxes[m].x - pad:.1f}" y="{boxes[m].y - pad:.1f}" width="{NODE_W + 2 * pad}" '
        f'height="{NODE_H + 2 * pad}" rx="14"/>'
        for m in members
    ]
    inside = set(members)
    for m in members:
        for i in inputs.get(m, ()):
            if i not in inside:
                continue
            a, b = boxes[i], boxes[m]  # a (input) is below b (consumer)
            pts = [
                (a.x + inset, a.y),
                (a.x + NODE_W - inset, a.y),
                (b.x + NODE_W - inset, b.y + NODE_H),
                (b.x + inset, b.y + NODE_H),
            ]
            shapes.append(
                '<polygon points="' + " ".join(f"{x:.1f},{y:.1f}" for x, y in pts) + '"/>'
            )
    body = "".join(shapes)
    stroke = engine_colors(engine)[1]
    top = min(members, key=lambda m: (boxes[m].y, boxes[m].x))
    lx, ly = boxes[top].x - pad + 4, boxes[top].y - pad - 6
    mask = f"gmask-{html_escape(gid)}"
    return (
        f'<g class="group" id="graph-{html_escape(gid)}">'
        f'<mask id="{mask}" maskUnits="userSpaceOnUse"><rect x="-10000" y="-10000" '
        f'width="40000" height="40000" fill="white"/><g fill="black">{body}</g></mask>'
        f'<g fill="{stroke}" opacity="0.08">{body}</g>'
        f'<g mask="url(#{mask})" fill="none" stroke="{stroke}" stroke-width="4" '
        f'stroke-dasharray="8 5">{body}</g>'
        f'<a href="#sql-{html_escape(gid)}"><text x="{lx:.1f}" y="{ly:.1f}" class="glabel" '
        f'fill="{stroke}">{html_escape(gid)} · {html_escape(engine)} · SQL ↓</text></a></g>'
    )


def _node(r: Mapping[str, Any], box: _Box) -> str:
    fill, stroke = engine_colors(r["engine"])
    hot = bool(r.get("bottleneck"))
    lam_in = ", ".join(fmt(v) for v in r.get("lambda_in") or []) or "—"
    unit = str(r.get("unit") or "")
    u_text = f"u {fmt(r.get('u'))}" + (f" ({unit})" if unit.startswith("g") else "")
    tip = (
        f"{r['id']} {r['kind']} {r.get('detail') or ''}\nengine: {r['engine']}\n"
        f"lambda in: {lam_in}/s, out: {fmt(r.get('lambda_out'))}/s\n"
        f"unit cost: {r.get('unit_cost')!s} s, u: {r.get('u')!s}, unit: {unit}"
        + ("\nBOTTLENECK" if hot else "")
    )
    x, y = box.x, box.y
    parts = [
        f'<g class="op" id="op-{html_escape(r["id"])}"><title>{html_escape(tip)}</title>',
        f'<rect x="{x:.1f}" y="{y:.1f}" width="{NODE_W}" height="{NODE_H}" rx="8" '
        f'fill="{fill}" stroke="{BOTTLENECK if hot else stroke}" '
        f'stroke-width="{3 if hot else 1.5}"/>',
        f'<text x="{x + 10:.1f}" y="{y + 18:.1f}" class="opid">{html_escape(r["id"])}</text>',
        f'<text x="{x + 10:.1f}" y="{y + 35:.1f}">{html_escape(r["kind"])} · '
        f'<tspan fill="{stroke}" font-weight="600">{html_escape(r["engine"])}</tspan></text>',
        f'<text x="{x + 10:.1f}" y="{y + 52:.1f}">{html_escape(u_text)}</text>',
        f'<text x="{x + 10:.1f}" y="{y + 68:.1f}" class="small">λ {html_escape(lam_in)} → '
        f"{html_escape(fmt(r.get('lambda_out')))}/s</text>",
    ]
    if hot:
        parts.append(
            f'<text x="{x + NODE_W - 8:.1f}" y="{y + 18:.1f}" text-anchor="end" '
            f'class="hot" fill="{BOTTLENECK}">▲ bottleneck</text>'
        )
    parts.append("</g>")
    return "".join(parts)


# -- charts -------------------------------------------------------------------------------

PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#e15759",
    "#76b7b2",
    "#b07aa1",
    "#9c755f",
    "#edc948",
    "#ff9da7",
    "#bab0ac",
)


@dataclass(frozen=True)
class Series:
    label: str
    color: str
    points: list[tuple[float, float]]
    dashed: bool = False


def _log_ticks(lo: float, hi: float) -> list[float]:
    ticks = []
    for k in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        for m in (1, 2, 5) if hi / lo < 1e3 else (1,):
            t = m * 10.0**k
            if lo <= t <= hi:
                ticks.append(t)
    return ticks


def _short(x: float) -> str:
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if x >= div:
            return f"{x / div:g}{suffix}"
    return f"{x:g}"


def log_chart(
    series: Sequence[Series],
    *,
    x_label: str,
    y_label: str,
    diagonal: str | None = None,
    vlines: Sequence[tuple[float, str]] = (),
    hlines: Sequence[tuple[float, str]] = (),
) -> str:
    """A log-log line chart. ``diagonal`` labels the y = x line; ``vlines``/``hlines`` are
    (value, label) markers."""
    xs = [x for s in series for x, _ in s.points if x > 0] + [v for v, _ in vlines if v > 0]
    ys = [y for s in series for _, y in s.points if y > 0] + [v for v, _ in hlines if v > 0]
    if not xs:
        return '<p class="note">(nothing to plot)</p>'
    x_lo, x_hi = min(xs) / 1.5, max(xs) * 1.5
    ys = ys + ([x_lo, x_hi] if diagonal else [])
    y_lo, y_hi = min(ys or [1.0]) / 1.5, max(ys or [10.0]) * 1.5
    left, right, top, bottom = 78, 300, 16, 50
    pw, ph = 560, 320
    width, height = left + pw + right, top + ph + bottom

    def px(x: float) -> float:
        return left + pw * (math.log10(x) - math.log10(x_lo)) / math.log10(x_hi / x_lo)

    def py(y: float) -> float:
        return top + ph * (1 - (math.log10(y) - math.log10(y_lo)) / math.log10(y_hi / y_lo))

    out = [
        f'<svg class="chart" role="img" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" aria-label="{html_escape(y_label)}">',
        f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="#fff" stroke="#999"/>',
    ]
    out.extend(
        f'<line x1="{px(t):.1f}" y1="{top}" x2="{px(t):.1f}" y2="{top + ph}" stroke="#eee"/>'
        f'<text x="{px(t):.1f}" y="{top + ph + 16}" text-anchor="middle" class="small">'
        f"{_short(t)}</text>"
        for t in _log_ticks(x_lo, x_hi)
    )
    out.extend(
        f'<line x1="{left}" y1="{py(t):.1f}" x2="{left + pw}" y2="{py(t):.1f}" stroke="#eee"/>'
        f'<text x="{left - 6}" y="{py(t) + 4:.1f}" text-anchor="end" class="small">'
        f"{_short(t)}</text>"
        for t in _log_ticks(y_lo, y_hi)
    )
    out.append(
        f'<text x="{left + pw / 2}" y="{height - 10}" text-anchor="middle">'
        f"{html_escape(x_label)}</text>"
        f'<text x="16" y="{top + ph / 2}" text-anchor="middle" '
        f'transform="rotate(-90 16 {top + ph / 2})">{html_escape(y_label)}</text>'
    )
    legend: list[tuple[str, str, bool]] = []
    if diagonal:
        lo, hi = max(x_lo, y_lo), min(x_hi, y_hi)
        if lo < hi:
            out.append(
                f'<line x1="{px(lo):.1f}" y1="{py(lo):.1f}" x2="{px(hi):.1f}" y2="{py(hi):.1f}" '
                'stroke="#999" stroke-dasharray="2 4"/>'
            )
        legend.append((diagonal, "#999", True))
    for v, label in vlines:
        out.append(
            f'<line x1="{px(v):.1f}" y1="{top}" x2="{px(v):.1f}" y2="{top + ph}" '
            f'stroke="{BOTTLENECK}" stroke-dasharray="5 3">'
            f"<title>{html_escape(label)}</title></line>"
        )
        legend.append((label, BOTTLENECK, True))
    for v, label in hlines:
        if y_lo < v < y_hi:
            out.append(
                f'<line x1="{left}" y1="{py(v):.1f}" x2="{left + pw}" y2="{py(v):.1f}" '
                f'stroke="#555" stroke-dasharray="8 3"><title>{html_escape(label)}</title></line>'
            )
            legend.append((label, "#555", True))
    for s in series:
        pts = [(px(x), py(y)) for x, y in sorted(s.points) if x > 0 and y > 0]
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        if len(pts) > 1:
            d = " ".join(f"{a:.1f},{b:.1f}" for a, b in pts)
            out.append(
                f'<polyline points="{d}" fill="none" stroke="{s.color}" stroke-width="2"{dash}/>'
            )
        for a, b in pts:
            fill = "#fff" if s.dashed else s.color
            out.append(
                f'<circle cx="{a:.1f}" cy="{b:.1f}" r="3.5" fill="{fill}" stroke="{s.color}"/>'
            )
        legend.append((s.label, s.color, s.dashed))
    for k, (label, color, dashed) in enumerate(legend):
        y = top + 10 + 18 * k
        x = left + pw + 14
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        out.append(
            f'<line x1="{x}" y1="{y}" x2="{x + 24}" y2="{y}" stroke="{color}" '
            f'stroke-width="2"{dash}/><text x="{x + 30}" y="{y + 4}" class="small">'
            f"{html_escape(label)}</text>"
        )
    out.append("</svg>")
    return "".join(out)


# -- the run's timeline -------------------------------------------------------------------


@dataclass(frozen=True)
class Panel:
    """One panel of a time chart: its series share a y axis (log scale when ``log``)."""

    y_label: str
    series: Sequence[Series]
    log: bool = False


@dataclass(frozen=True)
class Marker:
    """An event on a time chart: a line at ``x`` (a shaded span to ``until`` when the event
    lasts), a short ``label`` above the panels and a ``tip`` shown on hover."""

    x: float
    label: str
    tip: str
    until: float | None = None


@dataclass(frozen=True)
class Band:
    """A stretch of the time axis (``x0`` to ``x1``) drawn as a coloured strip under the
    panels, e.g. the plan in charge."""

    x0: float
    x1: float
    color: str
    label: str


def _nice_ticks(lo: float, hi: float, n: int = 6) -> list[float]:
    """About ``n`` round tick values from ``lo`` to ``hi`` (linear)."""
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    start = math.ceil(lo / step) * step
    return [start + k * step for k in range(int((hi - start) / step + 1e-9) + 1)]


def time_chart(
    panels: Sequence[Panel],
    *,
    x_label: str,
    x_max: float,
    gap: float,
    markers: Sequence[Marker] = (),
    bands: Sequence[Band] = (),
) -> str:
    """Panels stacked over one linear time axis (0 to ``x_max``) with event markers across
    all of them and a strip of bands below. A series' line breaks where consecutive points
    are more than ``gap`` apart (no data there)."""
    left, right, top, ph, between = 78, 250, 40, 170, 34
    pw = 760
    band_h = 16 if bands else 0
    height = top + len(panels) * (ph + between) + band_h + 40
    width = left + pw + right
    x_hi = max(x_max, 1e-9)

    def px(x: float) -> float:
        return left + pw * min(max(x, 0.0), x_hi) / x_hi

    out = [
        f'<svg class="timeline" role="img" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" aria-label="{html_escape(x_label)}">'
    ]
    legend: list[tuple[str, str, bool]] = []
    for k, panel in enumerate(panels):
        y0 = top + k * (ph + between)
        ys = [y for s in panel.series for _, y in s.points if y is not None]
        if panel.log:
            ys = [y for y in ys if y > 0]
        lo = min(ys) / 1.5 if (panel.log and ys) else 0.0
        hi = (max(ys) * (1.5 if panel.log else 1.1)) if ys else 1.0
        if panel.log and not ys:
            lo, hi = 0.1, 10.0
        if hi <= lo:
            hi = lo * 10 if panel.log else lo + 1.0

        def py(
            y: float, y0: float = y0, lo: float = lo, hi: float = hi, log: bool = panel.log
        ) -> float:
            if log:
                return y0 + ph * (1 - (math.log10(y) - math.log10(lo)) / math.log10(hi / lo))
            return y0 + ph * (1 - (y - lo) / (hi - lo))

        out.append(
            f'<g class="panel"><rect x="{left}" y="{y0}" width="{pw}" height="{ph}" '
            'fill="#fff" stroke="#999"/>'
        )
        ticks = _log_ticks(lo, hi) if panel.log else _nice_ticks(lo, hi, 4)
        out.extend(
            f'<line x1="{left}" y1="{py(t):.1f}" x2="{left + pw}" y2="{py(t):.1f}" '
            f'stroke="#eee"/><text x="{left - 6}" y="{py(t) + 4:.1f}" text-anchor="end" '
            f'class="small">{_short(t) if t >= 1 or t == 0 else f"{t:g}"}</text>'
            for t in ticks
        )
        out.append(
            f'<text x="16" y="{y0 + ph / 2}" text-anchor="middle" class="small" '
            f'transform="rotate(-90 16 {y0 + ph / 2})">{html_escape(panel.y_label)}</text>'
        )
        for s in panel.series:
            pts = sorted((x, y) for x, y in s.points if y is not None and (y > 0 or not panel.log))
            runs: list[list[tuple[float, float]]] = []
            for x, y in pts:
                if not runs or x - runs[-1][-1][0] > gap:
                    runs.append([])
                runs[-1].append((x, y))
            dash = ' stroke-dasharray="6 4"' if s.dashed else ""
            for run in runs:
                d = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in run)
                if len(run) == 1:
                    x, y = run[0]
                    out.append(
                        f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2" fill="{s.color}"/>'
                    )
                else:
                    out.append(
                        f'<polyline points="{d}" fill="none" stroke="{s.color}" '
                        f'stroke-width="1.6"{dash}/>'
                    )
            legend.append((s.label, s.color, s.dashed))
        out.append("</g>")
    bottom = top + len(panels) * (ph + between) - between
    out.extend(
        f'<text x="{px(t):.1f}" y="{bottom + band_h + 16}" text-anchor="middle" '
        f'class="small">{t:g}</text>'
        for t in _nice_ticks(0.0, x_hi, 8)
    )
    out.append(
        f'<text x="{left + pw / 2}" y="{height - 6}" text-anchor="middle">'
        f"{html_escape(x_label)}</text>"
    )
    for b in bands:
        x0, x1 = px(b.x0), px(b.x1)
        out.append(
            f'<rect class="band" x="{x0:.1f}" y="{bottom + 2}" width="{max(1.0, x1 - x0):.1f}" '
            f'height="{band_h - 4}" fill="{b.color}" opacity="0.7">'
            f"<title>{html_escape(b.label)}</title></rect>"
        )
    for k, m in enumerate(markers):
        x = px(m.x)
        label_y = top - 10 - 12 * (k % 2)  # neighbouring labels alternate in height
        tip = f"<title>{html_escape(m.tip)}</title>"
        out.append(f'<g class="marker">{tip}')
        if m.until is not None and m.until > m.x:
            out.append(
                f'<rect x="{x:.1f}" y="{top}" width="{max(1.0, px(m.until) - x):.1f}" '
                f'height="{bottom - top}" fill="{BOTTLENECK}" opacity="0.08"/>'
            )
        out.append(
            f'<line x1="{x:.1f}" y1="{top - 6}" x2="{x:.1f}" y2="{bottom}" '
            f'stroke="{BOTTLENECK}" stroke-width="1.5" stroke-dasharray="5 3"/>'
            f'<text x="{x + 3:.1f}" y="{label_y}" class="hot" fill="{BOTTLENECK}">'
            f"{html_escape(m.label)}</text></g>"
        )
    for k, (label, color, dashed) in enumerate(legend):
        y = top + 10 + 18 * k
        x = left + pw + 14
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        out.append(
            f'<line x1="{x}" y1="{y}" x2="{x + 24}" y2="{y}" stroke="{color}" '
            f'stroke-width="2"{dash}/><text x="{x + 30}" y="{y + 4}" class="small">'
            f"{html_escape(label)}</text>"
        )
    out.append("</svg>")
    return "".join(out)
