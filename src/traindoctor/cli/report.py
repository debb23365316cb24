"""``traindoctor report RUN``: re-render a saved run."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from traindoctor.record import load_run
from traindoctor.render import render_json, render_text
from traindoctor.report import build_report

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the command."""
    p = sub.add_parser(
        "report",
        help="show the diagnosis of a saved run",
        description="Load a run record (its folder or run.jsonl) and diagnose it.",
    )
    p.add_argument("run_path", type=Path, metavar="RUN", help="run folder or run.jsonl")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--width", type=int, default=100, help="width of the text report")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print the report to stdout."""
    report = build_report(load_run(args.run_path))
    if args.format == "json":
        sys.stdout.write(render_json(report))
    else:
        sys.stdout.write(render_text(report, width=args.width))
    return 0
