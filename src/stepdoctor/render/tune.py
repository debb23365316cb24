"""A ``stepdoctor tune`` sweep (``TuneResult``) as a terminal table and its recommendation."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table

from stepdoctor.model import TuneResult

__all__ = ["render_tune"]


def render_tune(result: TuneResult, *, width: int = 100) -> str:
    """The sweep as a table, then the recommendation."""
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    table = Table(title=f"stepdoctor tune: {result.script} ({result.steps} steps a run)")
    table.add_column("change")
    table.add_column(f"median {result.unit}", justify="right")
    table.add_column("runs", justify="right")
    table.add_column("vs baseline", justify="right")
    table.add_column("peak RSS", justify="right")
    base = result.baseline.median or 0.0
    for trial in (result.baseline, *result.trials):
        median = trial.median
        table.add_row(
            "baseline (as written)"
            if trial.change == "baseline"
            else f"{trial.change}={trial.value}",
            "failed" if median is None else f"{median:,.1f}",
            ", ".join(f"{r:,.0f}" for r in trial.samples_per_sec) or trial.failed[:40],
            "" if median is None or not base else f"{median / base:.2f}x",
            "" if trial.peak_rss_bytes is None else f"{trial.peak_rss_bytes / 2**20:,.0f} MiB",
        )
    console.print(table)
    if result.best is not None:
        console.print(f"Recommended: {result.reason}")
    else:
        console.print(f"No change recommended: {result.reason}")
    return console.export_text()
