"""``stepdoctor compare BEFORE AFTER``: is AFTER faster, beyond noise? (exit 1: regression)"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from stepdoctor.cli import summary
from stepdoctor.cli._common import write_output
from stepdoctor.compare import compare_runs
from stepdoctor.record import load_run
from stepdoctor.render.compare import comparison_to_dict, render_comparison

__all__ = ["EXIT_REGRESSION", "add_parser", "run"]

#: ``compare``'s exit code when AFTER is slower beyond noise by more than the threshold.
EXIT_REGRESSION = 1


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the command."""
    p = sub.add_parser(
        "compare",
        help=summary("compare"),
        description=(
            "Throughput, phase shares and findings of two runs side by side; whether AFTER is "
            "faster beyond the noise of the step times (Mann-Whitney U over the steps after "
            "warm-up, per sample when batch sizes are known)."
        ),
    )
    p.add_argument("before", type=Path, metavar="BEFORE", help="run folder or run.jsonl")
    p.add_argument("after", type=Path, metavar="AFTER", help="run folder or run.jsonl")
    p.add_argument(
        "--threshold",
        type=float,
        default=0.05,
        help="a slowdown beyond noise larger than this share is a regression (default 0.05)",
    )
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the comparison")
    p.add_argument("--width", type=int, default=100, help="width of the text")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print the comparison; 1 when AFTER regressed beyond the threshold."""
    comparison = compare_runs(load_run(args.before), load_run(args.after), threshold=args.threshold)
    sys.stdout.write(render_comparison(comparison, width=args.width))
    if args.json is not None:
        text = json.dumps(comparison_to_dict(comparison), indent=2, allow_nan=False) + "\n"
        write_output(args.json, text)
    return EXIT_REGRESSION if comparison.regression else 0
