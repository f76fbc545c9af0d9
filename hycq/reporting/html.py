"""HTML building blocks of the report page: tables, cells, numbers, sections, placements
and costs as escaped HTML strings (every text goes through ``html_escape``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from hycq.reporting.alternatives import off_row
from hycq.reporting.svg import (
    engine_colors,
    fmt,
    html_escape,
)
from optimizer.ir.cost import Cost


def table_html(
    head: Sequence[str], rows: Iterable[Sequence[str]], classes: Sequence[str] = ()
) -> str:
    """A table; cells are already-escaped HTML. ``classes`` are per-row class names."""
    cls = list(classes)
    out = ['<div class="scroll"><table><thead><tr>']
    out += [f"<th>{h}</th>" for h in head]
    out.append("</tr></thead><tbody>")
    for k, row in enumerate(rows):
        c = f' class="{cls[k]}"' if k < len(cls) and cls[k] else ""
        out.append(f"<tr{c}>" + "".join(cell_html(v) for v in row) + "</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def cell_html(v: str) -> str:
    if v.startswith("\x00num"):
        return f'<td class="num">{v[4:]}</td>'
    return f"<td>{v}</td>"


def num_html(x: float | None, unit: str = "") -> str:
    """A right-aligned number cell."""
    return "\x00num" + html_escape(fmt(x, unit))


def g_html(x: float | None) -> str:
    return "\x00num" + ("—" if x is None else html_escape(f"{x:.4g}"))


def feasible_html(ok: bool) -> str:
    return '<span class="ok">keeps up</span>' if ok else '<span class="bad">does not keep up</span>'


def placement_html(p: Mapping[str, str]) -> str:
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


def cost_html(c: Cost) -> str:
    b, u = html_escape(f"{c.bottleneck:.4g}"), html_escape(f"{c.utilization:.4g}")
    return f"&lt;C_b = {b}, C_u = {u}&gt;"


def section_html(anchor: str, title: str, *body: str) -> str:
    return f'<section id="{anchor}"><h2>{html_escape(title)}</h2>{"".join(body)}</section>'


# -- sections -----------------------------------------------------------------------------
