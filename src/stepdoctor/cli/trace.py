"""``stepdoctor trace PATH...``: analyse PyTorch-profiler (Kineto / Chrome-trace) files."""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from stepdoctor.cli._common import write_output
from stepdoctor.model import SCHEMA_VERSION, Finding, TraceSummary, to_jsonable
from stepdoctor.probes.run_meta import new_run_meta
from stepdoctor.render import findings_to_list, render_findings
from stepdoctor.report import trace_findings as run_trace_rules
from stepdoctor.traces import analyse_paths

__all__ = ["add_parser", "run", "summary_to_dict", "trace_findings"]

_TOP = 5


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the command."""
    p = sub.add_parser(
        "trace",
        help="analyse PyTorch profiler traces (one file per rank), like HTA but faster",
        description=(
            "Analyse Kineto/Chrome-trace JSON files (.json or .json.gz, or a folder with one "
            "file per rank): temporal breakdown, idle time by stream, top kernels, memcpy "
            "share, communication/computation overlap, launch statistics."
        ),
    )
    p.add_argument("paths", type=Path, nargs="+", metavar="PATH", help="trace files or folders")
    p.add_argument("--json", type=Path, dest="json_path", help="also write the analysis as JSON")
    p.add_argument(
        "--include-last-step",
        action="store_true",
        help="keep the last ProfilerStep (HTA leaves it out by default)",
    )
    p.add_argument(
        "--fast",
        action="store_true",
        help="without stepdoctor's C scanner (no compiler at install): parse each file "
        "whole with simdjson (pip install stepdoctor[fast]), ~1.5x faster than the "
        "streaming parser, several times the memory",
    )
    p.add_argument("--width", type=int, default=100, help="width of the text")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print the analysis and its findings; write JSON when asked."""
    summary = analyse_paths(
        list(args.paths), include_last_step=args.include_last_step, fast=args.fast
    )
    findings = trace_findings(summary)
    sys.stdout.write(render_trace(summary, width=args.width))
    sys.stdout.write(render_findings(findings, width=args.width))
    if args.json_path is not None:
        data = summary_to_dict(summary, findings)
        write_output(args.json_path, json.dumps(data, indent=2) + "\n")
    return 0


def trace_findings(summary: TraceSummary) -> list[Finding]:
    """Run the trace rules on the analysis of traces that belong to no run; ranked."""
    meta = new_run_meta(("stepdoctor", "trace"), time.perf_counter_ns())
    return run_trace_rules(summary, meta)


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
