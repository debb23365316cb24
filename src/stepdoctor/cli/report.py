"""``stepdoctor report RUN``: re-render a saved run."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from stepdoctor.cli import summary
from stepdoctor.cli._common import write_output
from stepdoctor.errors import UsageError
from stepdoctor.jobs.verdict import is_job_dir, job_report, rank_record
from stepdoctor.model import Report, RunRecord, TraceSummary
from stepdoctor.record import load_run
from stepdoctor.render.formats import RENDERERS, RenderInput
from stepdoctor.render.job import JOB_FORMATS, render_job_as
from stepdoctor.report import attach_verify, build_report, fold_trace, trace_of_run, verify_of_run

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the command."""
    p = sub.add_parser(
        "report",
        help=summary("report"),
        description="Load a run record (its folder or run.jsonl) and diagnose it.",
    )
    p.add_argument("run_path", type=Path, metavar="RUN", help="run folder or run.jsonl")
    p.add_argument(
        "--format",
        choices=tuple(RENDERERS),
        default="text",
        help="html: one self-contained page with plots; perfetto: the run's timeline as a "
        "Chrome/Perfetto trace (ui.perfetto.dev); speedscope: the sampled stacks, a profile "
        "per phase (speedscope.app)",
    )
    p.add_argument(
        "--speedscope",
        type=Path,
        metavar="FILE",
        help="also write the sampled stacks as a speedscope profile",
    )
    p.add_argument("-o", "--output", type=Path, metavar="FILE", help="write here, not stdout")
    p.add_argument("--width", type=int, default=100, help="width of the text report")
    p.add_argument(
        "--executor",
        choices=("process", "serial", "dask"),
        default="process",
        help="a distributed job's folder: where its ranks' records are read (a process pool, "
        "this process, or a Dask cluster: the [dask] extra)",
    )
    p.add_argument(
        "--dask-scheduler",
        metavar="ADDRESS",
        help="with --executor dask: the scheduler to use (default: a local cluster)",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print the report (or write it to ``--output``); a profiler trace the run captured
    (``run --trace``) is analysed and folded in."""
    if is_job_dir(Path(args.run_path)):  # a distributed job's folder: every rank's record
        return _job(args)
    record = load_run(args.run_path)
    renderer = RENDERERS[args.format]
    report, trace = (
        _diagnose(record, Path(args.run_path)) if renderer.needs_report else (None, None)
    )
    text = renderer.render(RenderInput(record=record, report=report, trace=trace, width=args.width))
    if args.output is None:
        sys.stdout.write(text)
    else:
        write_output(args.output, text)
        print(f"stepdoctor: wrote {args.output}", file=sys.stderr)
    if args.speedscope is not None:
        write_output(args.speedscope, RENDERERS["speedscope"].render(RenderInput(record=record)))
        print(f"stepdoctor: wrote {args.speedscope}", file=sys.stderr)
    return 0


def _job(args: argparse.Namespace) -> int:
    """A distributed job's folder: the job's report (text, JSON or HTML)."""
    folder = Path(args.run_path)
    if args.format not in JOB_FORMATS or args.speedscope is not None:
        raise UsageError(
            f"{folder} holds a distributed job's ranks: its report is "
            f"{', '.join(JOB_FORMATS)}; for one rank's {args.format} give that rank's folder "
            f"({folder}/rank-0)"
        )
    job = job_report(folder, executor=args.executor, scheduler=args.dask_scheduler)
    first = rank_record(folder) if args.format == "html" else None  # the page's detail
    if not job.ranks or (args.format == "html" and first is None):
        raise UsageError(f"no rank's record in {folder} could be read: {'; '.join(job.problems)}")
    text = render_job_as(args.format, job, first, width=args.width)
    if args.output is None:
        sys.stdout.write(text)
    else:
        write_output(args.output, text)
        print(f"stepdoctor: wrote {args.output}", file=sys.stderr)
    return 0


def _diagnose(record: RunRecord, run_path: Path) -> tuple[Report, TraceSummary | None]:
    """The run's report, with the analysis of its profiler trace folded in (or a warning saying
    why the trace could not be read)."""
    report = build_report(record)
    verified = verify_of_run(run_path)
    if verified is not None:
        report = attach_verify(report, *verified)
    trace, problem = trace_of_run(run_path)
    if trace is not None:
        report = fold_trace(report, trace)
    elif problem is not None:
        report = dataclasses.replace(report, warnings=(*report.warnings, problem))
    return report, trace
