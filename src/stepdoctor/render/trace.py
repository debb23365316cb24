"""A profiler-trace analysis (``TraceSummary``) as terminal tables and as JSON values."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console
from rich.table import Table

from stepdoctor.model import SCHEMA_VERSION, Finding, TraceSummary, to_jsonable
from stepdoctor.render.json import findings_to_list

__all__ = ["render_trace", "summary_to_dict"]

#: Kernels listed per rank in the terminal tables.
_TOP = 5


def summary_to_dict(summary: TraceSummary, findings: list[Finding] | None = None) -> dict[str, Any]:
    """The analysis as JSON: ``ranks`` (with ``temporal_breakdown`` and
    ``comm_comp_overlap_pct``), ``kernel_type_breakdown`` (all ranks), ``warnings`` and
    ``findings`` (ranked, shaped as in a run's report)."""
    ranks = []
    for r in summary.ranks:
        data = to_jsonable(r)
        data["temporal_breakdown"] = data.pop("temporal")
        ranks.append(data)
    return {
        "schema_version": SCHEMA_VERSION,
        "ranks": ranks,
        "kernel_type_breakdown": [
            {"kernel_type": label, "sum_us": us, "percentage": pct}
            for label, us, pct in summary.kernel_type_table()
        ],
        "warnings": list(summary.warnings),
        "findings": findings_to_list(findings or []),
    }


def render_trace(summary: TraceSummary, *, width: int = 100, notes: bool = True) -> str:
    """Per-rank tables as terminal text, and the analysis's notes (``notes``: a run's report
    prints them among its own warnings instead)."""
    console = Console(width=width, file=io.StringIO(), record=True, color_system=None)
    table = Table(title="Temporal breakdown (µs, % of GPU kernel time)", title_justify="left")
    for column in ("rank", "kernel time", "idle", "compute", "non-compute", "memcpy share",
                   "comm/comp overlap", "launches"):  # fmt: skip
        table.add_column(column, justify="right")
    for r in summary.ranks:
        t = r.temporal
        memory = dict(r.type_us).get("MEMORY", 0)
        total = sum(us for _, us in r.type_us)
        table.add_row(
            str(r.rank),
            "-" if t is None else f"{t.kernel_time_us:,}",
            "-" if t is None else f"{t.idle_us:,} ({t.idle_pct:.2f}%)",
            "-" if t is None else f"{t.compute_us:,} ({t.compute_pct:.2f}%)",
            "-" if t is None else f"{t.non_compute_us:,} ({t.non_compute_pct:.2f}%)",
            f"{100 * memory / total:.1f}%" if total else "-",
            "n/a" if r.comm_comp_overlap_pct is None else f"{r.comm_comp_overlap_pct:.2f}%",
            "-" if r.launch is None else f"{r.launch.launches:,}",
        )
    if any(r.temporal is not None or r.launch is not None or r.type_us for r in summary.ranks):
        console.print(table)  # a trace without GPU events has nothing for it (the note says so)
    types = Table(
        title="GPU time by kernel type, all ranks (µs; overlaps apart)",
        title_justify="left",
        box=None,
    )
    for column in ("kernel types running", "µs", "share"):
        types.add_column(column, justify="left" if column.startswith("kernel") else "right")
    for label, us, pct in summary.kernel_type_table():
        types.add_row(label, f"{us:,}", f"{pct:.1f}%")
    if types.row_count:
        console.print(types)
    for r in summary.ranks:
        top = Table(title=f"rank {r.rank}: top kernels", title_justify="left", box=None)
        top.add_column("kernel", overflow="ellipsis", no_wrap=True, max_width=width - 30)
        top.add_column("type", no_wrap=True, min_width=len("COMMUNICATION"))
        top.add_column("µs", justify="right")
        top.add_column("share", justify="right")
        for k in r.kernels[:_TOP]:
            top.add_row(k.name, k.kernel_type, f"{k.sum_us:,}", f"{k.share_pct:.2f}%")
        if top.row_count:
            console.print(top)
        idle = Table(
            title=f"rank {r.rank}: idle time by stream (µs)", title_justify="left", box=None
        )
        for column in ("stream", "host wait", "kernel wait", "other"):
            idle.add_column(column, justify="right")
        for s in r.idle_by_stream:
            idle.add_row(
                str(s.stream), f"{s.host_wait_us:,}", f"{s.kernel_wait_us:,}", f"{s.other_us:,}"
            )
        if idle.row_count:
            console.print(idle)
        if r.launch is not None:
            ls = r.launch
            console.print(
                f"rank {r.rank}: {ls.launches:,} launches; median cpu {ls.cpu_median_us:g} µs, "
                f"gpu {ls.gpu_median_us:g} µs, delay {ls.delay_median_us:g} µs; short kernels "
                f"{ls.short_kernels:,}, runtime > 50 µs {ls.runtime_outliers:,}, "
                f"delay > 100 µs {ls.delay_outliers:,}"
            )
    for warning in summary.warnings if notes else ():
        console.print(f"note: {warning}")
    return console.export_text()
