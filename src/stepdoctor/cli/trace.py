"""``stepdoctor trace PATH...``: analyse PyTorch-profiler (Kineto / Chrome-trace) files."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from stepdoctor.cli import summary
from stepdoctor.cli._common import write_output
from stepdoctor.model import Finding, TraceSummary
from stepdoctor.probes.run_meta import new_run_meta
from stepdoctor.render import render_findings
from stepdoctor.render.trace import render_trace, summary_to_dict
from stepdoctor.report import trace_findings as run_trace_rules
from stepdoctor.traces import analyse_paths

__all__ = ["add_parser", "run", "trace_findings"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the command."""
    p = sub.add_parser(
        "trace",
        help=summary("trace"),
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
