"""What ``stepdoctor logs`` read, as terminal text and as JSON values.

The JSON has the report's keys (a DL4J log's steps, the findings), ``gc_logs`` (one entry per
GC log) and, when exactly one GC log was given, ``gc``: its entry, whose keys other tools can
rely on: ``pauses``, ``total_pause_s``, ``max_pause_s``, ``mean_pause_s``, ``throughput_pct``,
``full_gcs``, ``duration_s``, ``collector``.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from stepdoctor.model import Report
from stepdoctor.model.jvm import Dl4jLog, JvmGcLog
from stepdoctor.render.json import report_to_dict
from stepdoctor.render.text import render_findings, render_text

__all__ = ["gc_to_dict", "logs_to_dict", "render_logs_text"]


def gc_to_dict(log: JvmGcLog) -> dict[str, Any]:
    """One GC log's figures as JSON values (the ``gc`` section)."""
    throughput = log.throughput_pct
    return {
        "source": log.source,
        "format": log.format,
        "collector": log.collector,
        "pauses": log.pauses,
        "total_pause_s": round(log.total_pause_s, 7),
        "max_pause_s": round(log.max_pause_s, 7),
        "mean_pause_s": round(log.mean_pause_s, 7),
        "throughput_pct": None if throughput is None else round(throughput, 6),
        "full_gcs": log.full_gcs,
        "full_pause_s": round(log.full_pause_s, 7),
        "duration_s": round(log.duration_s, 7),
        "first_t_s": log.first_t_s,
        "last_t_s": log.last_t_s,
        "started_unix_s": log.started_unix_s,
        "safepoint_pauses": log.safepoint_pauses,
        "safepoint_s": round(log.safepoint_s, 7),
        "concurrent_s": round(log.concurrent_s, 7),
        "pause_times_known": log.pause_times_known,
        "causes": [
            {
                "kind": c.kind,
                "cause": c.cause,
                "count": c.count,
                "total_s": round(c.total_s, 7),
                "max_s": round(c.max_s, 7),
            }
            for c in log.causes
        ],
        "problems": [
            {"name": p.name, "count": p.count, "first_t_s": p.first_t_s} for p in log.problems
        ],
        "longest": [
            {"t_s": p.t_s, "pause_s": p.pause_s, "kind": p.kind, "cause": p.cause}
            for p in log.longest
        ],
        "heap_max_bytes": log.heap_max_bytes,
        "lines": log.lines,
        "unparsed": log.unparsed,
        "unparsed_samples": list(log.unparsed_samples),
    }


def logs_to_dict(
    report: Report, gc_logs: Sequence[JvmGcLog], dl4j_logs: Sequence[Dl4jLog]
) -> dict[str, Any]:
    """The report, the GC logs' figures and the DL4J logs' facts as JSON values."""
    data = report_to_dict(report)
    sections = [gc_to_dict(log) for log in gc_logs]
    data["gc_logs"] = sections
    if len(sections) == 1:
        data["gc"] = sections[0]
    data["dl4j_logs"] = [
        {
            "source": log.source,
            "iterations": len(log.iterations),
            "facts": dict(log.facts),
            "lines": log.lines,
            "unparsed": log.unparsed,
        }
        for log in dl4j_logs
    ]
    return data


def render_logs_text(
    report: Report, gc_logs: Sequence[JvmGcLog], dl4j_logs: Sequence[Dl4jLog], *, width: int
) -> str:
    """The GC logs' figures, the DL4J job's report (its steps) and the findings."""
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, color_system=None, highlight=False)
    if gc_logs:
        console.print(_gc_table(gc_logs))
    for log in dl4j_logs:
        facts = dict(log.facts)
        shown = ", ".join(
            f"{name.split('.', 1)[1]} {facts[name]}"
            for name in ("nd4j.backend", "nd4j.blas", "nd4j.omp_threads", "nd4j.cudnn_version",
                         "dl4j.workspace_training", "nd4j.periodic_gc")
            if name in facts
        )  # fmt: skip
        console.print(
            f"DL4J log {log.source}: {len(log.iterations)} PerformanceListener iterations"
            + (f"; {shown}" if shown else ""),
            soft_wrap=True,
        )
    text = buffer.getvalue()
    if report.summary.steps:
        return text + render_text(report, width=width)
    text += render_findings(list(report.findings), width=width)
    for warning in report.warnings:
        text += f"note: {warning}\n"
    return text


def _gc_table(gc_logs: Sequence[JvmGcLog]) -> Table:
    table = Table(title="JVM garbage collection", title_justify="left")
    for column in ("log", "collector", "span", "pauses", "in pauses", "longest", "full GCs",
                   "throughput"):  # fmt: skip
        table.add_column(
            column,
            justify="left" if column in ("log", "collector") else "right",
            overflow="fold",
            min_width=12 if column == "log" else None,
        )
    for log in gc_logs:
        throughput = log.throughput_pct
        table.add_row(
            Path(log.source).name or log.source,
            log.collector or "?",
            f"{log.duration_s:,.1f} s",
            f"{log.pauses:,}" if log.pause_times_known else "not logged",
            f"{log.total_pause_s:,.3f} s",
            f"{log.max_pause_s * 1000:,.1f} ms",
            f"{log.full_gcs:,}",
            "n/a" if throughput is None else f"{throughput:.2f}%",
        )
    return table
