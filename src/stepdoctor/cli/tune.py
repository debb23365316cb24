"""``stepdoctor tune SCRIPT``: measure one-change variants of the job and keep the best."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from stepdoctor.cli import summary
from stepdoctor.cli._common import write_output
from stepdoctor.collect import default_run_dir
from stepdoctor.collect.runner import check_script
from stepdoctor.errors import StepdoctorError
from stepdoctor.experiments.tune import BASELINE_RUN, DIMENSIONS, tune
from stepdoctor.model import to_jsonable
from stepdoctor.record import load_run
from stepdoctor.render import render_text
from stepdoctor.render.tune import render_tune
from stepdoctor.report import attach_tune, build_report
from stepdoctor.watching import stderr_line

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the command."""
    p = sub.add_parser(
        "tune",
        help=summary("tune"),
        description=(
            "Run SCRIPT several times for --steps optimizer steps, each run with one change "
            "applied without editing it (DataLoader workers and settings, torch threads, "
            "batch size), and report each one's samples/s and peak memory. The best change "
            "is recommended only when it is faster beyond noise."
        ),
    )
    p.add_argument("--steps", type=int, default=50, help="optimizer steps per run (default 50)")
    p.add_argument("--repeats", type=int, default=2, help="runs per configuration (default 2)")
    p.add_argument(
        "--only",
        default=",".join(DIMENSIONS),
        help=f"what to sweep, comma-separated from {','.join(DIMENSIONS)} (default: all)",
    )
    p.add_argument("--timeout", type=float, default=300.0, metavar="S", help="per run")
    p.add_argument(
        "--out",
        type=Path,
        help="keep every run's record here (default: a new folder under ./stepdoctor-runs/)",
    )
    p.add_argument("--json", type=Path, dest="json_path", help="also write the result as JSON")
    p.add_argument("--width", type=int, default=100, help="width of the table")
    p.add_argument("script", type=Path, help="the Python script to tune")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the sweep; print the table; 0 whether or not a change was recommended."""
    check_script(args.script)
    only = tuple(x.strip() for x in args.only.split(",") if x.strip())
    run_dir = default_run_dir()
    out_dir = args.out or run_dir.with_name(f"tune-{run_dir.name}")
    result = tune(
        args.script,
        list(args.args),
        steps=args.steps,
        repeats=args.repeats,
        only=only,
        timeout_s=args.timeout,
        progress=lambda text: stderr_line(f"tune: {text}"),
        out_dir=out_dir,
    )
    sys.stdout.write(render_tune(result, width=args.width))
    try:
        report = attach_tune(build_report(load_run(out_dir / BASELINE_RUN)), result)
    except StepdoctorError as exc:
        stderr_line(f"no diagnosis of the baseline run: {exc}")
    else:
        sys.stdout.write("\nThe baseline run's diagnosis, with what tune measured:\n")
        sys.stdout.write(render_text(report, width=args.width))
    stderr_line(f"runs kept in {out_dir}")
    if args.json_path is not None:
        write_output(args.json_path, json.dumps(to_jsonable(result), indent=2) + "\n")
    return 0
