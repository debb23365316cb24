"""A comparison of two runs as terminal text and as JSON values."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console
from rich.table import Table

from stepdoctor.model import SCHEMA_VERSION, to_jsonable
from stepdoctor.model.comparison import Comparison
from stepdoctor.render.names import phase_label

__all__ = ["comparison_to_dict", "render_comparison"]


def comparison_to_dict(c: Comparison) -> dict[str, Any]:
    """JSON values: everything in the comparison, plus ``speedup`` (before / after)."""
    data: dict[str, Any] = {"schema_version": SCHEMA_VERSION, **to_jsonable(c)}
    data["speedup"] = _speedup(c)
    for row, phase in zip(data["phases"], c.phases, strict=True):
        row["change_ms"] = round(phase.change_ms, 4)
    return data


def _speedup(c: Comparison) -> float | None:
    if c.before_median is None or not c.after_median:
        return None
    return round(c.before_median / c.after_median, 4)


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def render_comparison(c: Comparison, *, width: int = 100) -> str:
    """The comparison as terminal text: verdict first, then the numbers."""
    console = Console(width=width, file=io.StringIO(), record=True, color_system=None)
    speedup = _speedup(c)
    if c.verdict == "faster":
        head = f"AFTER is faster: {speedup:.2f}x ({-c.change:.1%} less {c.unit})"
    elif c.verdict == "slower":
        head = f"AFTER is slower: {c.change:+.1%} {c.unit}"
        if c.regression:
            head += f" — a regression beyond the {c.threshold:.0%} threshold"
    else:
        head = f"No significant change ({c.change:+.1%} {c.unit})"
    console.print(f"{head}  [Mann-Whitney U, p = {c.p_value:.2g}]", markup=False)
    table = Table(title="Runs", title_justify="left", box=None)
    for column in ("", "BEFORE", "AFTER"):
        table.add_column(column, justify="left" if not column else "right")
    b, a = c.before, c.after
    table.add_row("run", c.before_run, c.after_run)
    table.add_row("steps (after warm-up)", f"{b.steps - b.warmup_steps:,}",
                  f"{a.steps - a.warmup_steps:,}")  # fmt: skip
    table.add_row("samples/s", _fmt(b.samples_per_sec, 1), _fmt(a.samples_per_sec, 1))
    table.add_row("mean step (ms)", _fmt(b.mean_step_ms), _fmt(a.mean_step_ms))
    table.add_row(f"median ({c.unit})", _fmt(c.before_median, 4), _fmt(c.after_median, 4))
    console.print(table)
    phases = Table(title=f"Phases ({c.unit}, mean)", title_justify="left", box=None)
    for column in ("phase", "BEFORE", "AFTER", "change"):
        phases.add_column(column, justify="left" if column == "phase" else "right")
    for p in c.phases:
        label = "GC pauses" if p.phase == "gc" else phase_label(p.phase)
        phases.add_row(label, _fmt(p.before_ms, 4), _fmt(p.after_ms, 4), f"{p.change_ms:+.4f}")
    if phases.row_count:
        console.print(phases)
    if c.findings:
        found = Table(title="Findings that changed", title_justify="left", box=None)
        for column in ("rule", "BEFORE", "AFTER", "title"):
            found.add_column(column)
        for f in c.findings:
            found.add_row(f.rule, f.before or "—", f.after or "—", f.title)
        console.print(found)
    else:
        console.print("Findings: the same in both runs.")
    for warning in c.warnings:
        console.print(f"note: {warning}", markup=False)
    return console.export_text()
