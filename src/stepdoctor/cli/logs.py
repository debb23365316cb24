"""``stepdoctor logs FILE...``: diagnose a JVM job from its DL4J training log and its GC logs."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from stepdoctor.cli import summary
from stepdoctor.cli._common import write_output
from stepdoctor.logs import read_logs
from stepdoctor.render.html import render_html
from stepdoctor.render.logs import logs_to_dict, render_logs_text
from stepdoctor.report import build_report

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the command."""
    p = sub.add_parser(
        "logs",
        help=summary("logs"),
        description=(
            "Read DL4J training logs (PerformanceListener, ScoreIterationListener, ND4J's "
            "start-up lines) and JVM GC logs (JDK 8 -XX:+PrintGCDetails, JDK 9+ -Xlog:gc*), "
            "telling each file's kind from its lines: files, folders, .gz, or - for stdin."
        ),
    )
    p.add_argument("paths", nargs="+", metavar="FILE", help="log files, folders, or - (stdin)")
    p.add_argument("--json", dest="json_path", metavar="FILE", help="also write JSON to FILE")
    p.add_argument(
        "--html",
        dest="html_path",
        metavar="FILE",
        help="also write one self-contained HTML page: GC pauses and heap over time, the "
        "iterations' time with GC pauses",
    )
    p.add_argument("--width", type=int, default=100, help="width of the text")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print what the logs say and the findings; write JSON when asked."""
    read = read_logs(list(args.paths), ("stepdoctor", "logs", *args.paths))
    report = build_report(read.record)
    sys.stdout.write(render_logs_text(report, read.gc_logs, read.dl4j_logs, width=args.width))
    if args.json_path is not None:
        data = logs_to_dict(report, read.gc_logs, read.dl4j_logs)
        write_output(Path(args.json_path), json.dumps(data, indent=2, allow_nan=False) + "\n")
    if args.html_path is not None:
        write_output(Path(args.html_path), render_html(read.record, report))
    return 0
