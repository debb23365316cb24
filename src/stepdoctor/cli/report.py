"""``stepdoctor report RUN``: re-render a saved run."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from stepdoctor.cli._common import write_output
from stepdoctor.record import load_run
from stepdoctor.render import render_json, render_text
from stepdoctor.render.html import render_html
from stepdoctor.render.perfetto import render_perfetto
from stepdoctor.render.trace import render_trace
from stepdoctor.report import build_report, fold_trace, trace_of_run

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the command."""
    p = sub.add_parser(
        "report",
        help="show the diagnosis of a saved run",
        description="Load a run record (its folder or run.jsonl) and diagnose it.",
    )
    p.add_argument("run_path", type=Path, metavar="RUN", help="run folder or run.jsonl")
    p.add_argument(
        "--format",
        choices=("text", "json", "html", "perfetto"),
        default="text",
        help="html: one self-contained page with plots; perfetto: the run's timeline as a "
        "Chrome/Perfetto trace (ui.perfetto.dev)",
    )
    p.add_argument("-o", "--output", type=Path, metavar="FILE", help="write here, not stdout")
    p.add_argument("--width", type=int, default=100, help="width of the text report")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print the report (or write it to ``--output``); a profiler trace the run captured
    (``run --trace``) is analysed and folded in."""
    record = load_run(args.run_path)
    if args.format == "perfetto":  # the timeline alone: no diagnosis needed
        text = render_perfetto(record)
    else:
        report = build_report(record)
        trace, problem = trace_of_run(Path(args.run_path))
        if trace is not None:
            report = fold_trace(report, trace)
        elif problem is not None:
            report = dataclasses.replace(report, warnings=(*report.warnings, problem))
        if args.format == "html":
            text = render_html(record, report, trace)
        elif args.format == "json":
            text = render_json(report)
        else:
            text = render_text(report, width=args.width)
            if trace is not None:
                text = render_trace(trace, width=args.width, notes=False) + text
    if args.output is None:
        sys.stdout.write(text)
    else:
        write_output(args.output, text)
        print(f"stepdoctor: wrote {args.output}", file=sys.stderr)
    return 0
