"""``stepdoctor run SCRIPT [ARGS]`` (or ``-m MODULE [ARGS]``): run a training script
unmodified and diagnose it. Under torchrun each rank records into a folder of its own
(``probes/ranks.py``); ``--nproc-per-node N`` launches the ranks itself (``launch.py``)."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from stepdoctor.cli import summary
from stepdoctor.cli._common import error_line
from stepdoctor.collect import Session, default_run_dir
from stepdoctor.collect.hooks.profiling import TraceCapture
from stepdoctor.collect.hooks.trigger import ExperimentTrigger, ObjectKeeper
from stepdoctor.collect.runner import (
    ScriptResult,
    check_module,
    check_script,
    import_torch_if_available,
    run_module,
    run_script,
)
from stepdoctor.collect.sampling.stacks import SAMPLE_INTERVAL_S
from stepdoctor.errors import UsageError
from stepdoctor.experiments.budgets import DEFAULT_BUDGET_S, DEFAULT_SHARE
from stepdoctor.experiments.overrides import Overrides, apply_overrides
from stepdoctor.integrations import AutoIntegrations
from stepdoctor.probes.flight import STALL_AFTER_S
from stepdoctor.probes.ranks import job_dir, rank_dir, rank_from_env
from stepdoctor.watching import stderr_line

if TYPE_CHECKING:
    from stepdoctor.model import Report, TraceSummary

# What runs only after the job (the report, the renderers, --verify's trials, the trace's
# analysis) or only for some options (the launcher, the experiments) is imported there:
# each module loaded before the job's first line delays it.

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the command."""
    p = sub.add_parser(
        "run",
        help=summary("run"),
        description="Run SCRIPT as __main__ with ARGS, watch it, diagnose it.",
    )
    p.add_argument(
        "--out",
        type=Path,
        help="folder for the run record (default: ./stepdoctor-runs/<timestamp>-<pid>)",
    )
    p.add_argument("--json", type=Path, dest="json_path", help="also write the report as JSON")
    p.add_argument(
        "--html",
        type=Path,
        dest="html_path",
        metavar="FILE",
        help="also write the report as one self-contained HTML page with plots",
    )
    p.add_argument(
        "--log-every",
        type=int,
        metavar="N",
        help="print a progress line every N steps (default: every 10 s)",
    )
    p.add_argument(
        "--interval",
        type=float,
        default=0.1,
        metavar="S",
        help="sampling period of CPU/memory/GPU in seconds (default 0.1)",
    )
    p.add_argument(
        "--experiments",
        action="store_true",
        help="after the warm-up, pause the job once to measure data-only and compute-only "
        "throughput with its own loader, model and batch (the job's results are unchanged)",
    )
    p.add_argument(
        "--experiment-budget",
        type=float,
        default=DEFAULT_BUDGET_S,
        metavar="S",
        help=f"longest pause for the experiments in seconds (default {DEFAULT_BUDGET_S:g})",
    )
    p.add_argument(
        "--verify",
        action="store_true",
        help="after the job ends, try the top findings' fixes with its own model, loader and "
        "batch (a larger batch, float32, thread counts, batched indexing, more workers), "
        "interleaved and repeated, and report each measured speed-up instead of the model's",
    )
    p.add_argument(
        "--verify-budget",
        type=float,
        metavar="S",
        help=f"longest time for --verify in seconds (default: {DEFAULT_SHARE:.0%}% of the "
        "job's own time)",
    )
    p.add_argument(
        "--trace",
        action="store_true",
        help="capture a short torch.profiler trace of the job's steps after its warm-up "
        "(into the run folder, Perfetto-loadable) and fold its analysis into the report",
    )
    p.add_argument(
        "--stacks",
        choices=("thread", "py-spy", "off"),
        default="thread",
        help="how Python stacks are sampled, for where each phase's time goes: thread (in "
        "the job's process, each sample tagged with its phase; the default), py-spy (from "
        "outside, needs py-spy and ptrace permission; no phases) or off",
    )
    p.add_argument(
        "--nproc-per-node",
        type=int,
        metavar="N",
        help="run N ranks of the job on this machine through torch.distributed.run "
        "(torchrun --standalone), each watched, each rank's record in OUT/rank-N",
    )
    p.add_argument(
        "--stall-after",
        type=float,
        default=STALL_AFTER_S,
        metavar="SECONDS",
        help="with --nproc-per-node: when no rank has completed a step for this long, say "
        f"which rank the others wait for and where it is, while the job waits (default "
        f"{STALL_AFTER_S:.0f}; 0: never)",
    )
    p.add_argument("--no-report", action="store_true", help="do not print the diagnosis")
    p.add_argument("--width", type=int, default=100, help="width of the printed report")
    p.add_argument(
        "-m",
        dest="module",
        metavar="MODULE",
        help="run a module as `python -m MODULE` does, instead of a script",
    )
    p.add_argument("script", type=Path, nargs="?", help="the Python script to run")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the script; return its exit code (stepdoctor's own problems do not change it)."""
    job_args = list(args.args)
    if args.module is not None:
        if args.script is not None:  # `-m pkg.mod a b`: "a" is the module's first argument
            job_args = [str(args.script), *job_args]
        check_module(args.module)
        target = ["-m", args.module, *job_args]
    elif args.script is None:
        raise UsageError("give the script to run (or -m MODULE)")
    else:
        check_script(args.script)
        target = [str(args.script), *job_args]
    if args.nproc_per_node is not None:
        from stepdoctor.cli.launch import launch

        return launch(args, args.out or default_run_dir(), target)
    if args.verify and args.experiments:
        raise UsageError(
            "--verify measures after the job ends (data and compute included); drop "
            "--experiments, which pauses the job to measure during it"
        )
    overrides = Overrides.from_env(os.environ)
    args.tuning_run = overrides is not None
    if overrides is not None or args.trace:  # they set torch up before the job starts
        import_torch_if_available()
    remove_overrides = apply_overrides(overrides) if overrides is not None else None
    rank = rank_from_env()
    out_dir = args.out or default_run_dir()
    show = not args.no_report
    if rank is not None:  # one of torchrun's ranks: a folder of its own; rank 0 reports
        out_dir = rank_dir(args.out or job_dir(rank), rank)
        show = show and rank.rank == 0
    capture = TraceCapture(out_dir / "trace") if args.trace else None
    keeper = ObjectKeeper() if args.verify else None
    trigger: ExperimentTrigger | None = keeper
    if args.experiments:
        from stepdoctor.experiments import make_run_experiment

        trigger = ExperimentTrigger(
            make_run_experiment(args.experiment_budget, progress=_experiment_line)
        )
    session = Session(
        out_dir,
        command=("stepdoctor", "run", *target),
        interval_s=args.interval,
        log_every_steps=args.log_every,
        progress_sink=stderr_line,
        instrument_torch="on-import",
        experiment=trigger,
        max_steps=None if overrides is None else overrides.max_steps,
        trace=capture,
        stack_interval_s=None if args.stacks == "off" else SAMPLE_INTERVAL_S,
        stack_sampler="py-spy" if args.stacks == "py-spy" else "thread",
    )
    session.start()
    frameworks = AutoIntegrations(session)
    frameworks.install()
    stderr_line(f"recording to {session.out_dir}")
    result = None
    try:
        result = (
            run_module(args.module, job_args)
            if args.module is not None
            else run_script(args.script, job_args)
        )
    finally:
        frameworks.uninstall()
        if result is None:  # only a BaseException escaping run_script (it catches all)
            record = session.stop("exception", 1, "stepdoctor runner failed")
        else:
            record = session.stop(
                result.status, result.exit_code, result.error, error_at=result.error_at
            )
        if remove_overrides is not None:
            remove_overrides()
    if not (show or args.json_path or args.html_path or keeper or capture):
        stderr_line(f"run record: {session.record_path}")  # no report asked for: none built
        return result.exit_code
    try:
        from stepdoctor.render.formats import RENDERERS, RenderInput
        from stepdoctor.report import build_report

        report = build_report(record)
        if keeper is not None:
            report = _verified(report, keeper, result, out_dir, args.verify_budget)
        trace = None
        if capture is not None:
            report, trace = _with_trace(report, capture, show=show, width=args.width)
        view = RenderInput(record=record, report=report, trace=trace, width=args.width)
        if show:  # without the trace's tables: _with_trace showed them
            sys.stderr.write(RENDERERS["text"].render(dataclasses.replace(view, trace=None)))
        for name, path in (("json", args.json_path), ("html", args.html_path)):
            if path is not None and (rank is None or rank.rank == 0):
                path.write_text(RENDERERS[name].render(view), encoding="utf-8")
        if args.html_path is not None:
            stderr_line(f"HTML report: {args.html_path}")
    except Exception as exc:  # the job's exit code wins over a reporting failure
        error_line(f"could not build the report: {exc!r} (the run record is kept)")
    stderr_line(f"run record: {session.record_path}")
    return result.exit_code


def _verified(
    report: Report,
    keeper: ObjectKeeper,
    result: ScriptResult | None,
    out_dir: Path,
    budget_s: float | None,
) -> Report:
    """``--verify``: the fixes of the report's findings tried with the job's objects, measured,
    kept in the run folder and attached to the report."""
    from stepdoctor.experiments.verify import verify
    from stepdoctor.model import FixTrial
    from stepdoctor.report import attach_verify, write_verify

    objects = keeper.objects()
    trials: list[FixTrial] = []
    ended_well = result is not None and (
        result.status in ("ok", "stopped") or (result.status == "exit" and result.exit_code == 0)
    )
    if not ended_well:
        notes = ["fixes not verified: the job did not end normally"]
    elif objects is None:
        notes = ["fixes not verified: no model and batch of the job were seen"]
    else:
        budget = budget_s if budget_s is not None else DEFAULT_SHARE * report.summary.wall_s
        stderr_line(f"verify: trying the findings' fixes (<= {budget:.1f} s)")
        trials, notes = verify(objects, report, budget_s=budget, progress=_verify_line)
    keeper.release()
    write_verify(out_dir, trials, notes)
    return attach_verify(report, trials, notes)


def _verify_line(text: str) -> None:
    stderr_line(f"verify: {text}")


def _experiment_line(text: str) -> None:
    """Show what ``--experiments`` is doing while the job is paused (one stderr line)."""
    stderr_line(f"experiments: {text}")


def _with_trace(
    report: Report, capture: TraceCapture, *, show: bool, width: int
) -> tuple[Report, TraceSummary | None]:
    """Fold the captured trace's analysis into the report (its findings join, ranked)."""
    from stepdoctor.render.trace import render_trace
    from stepdoctor.report import fold_trace
    from stepdoctor.traces import analyse_paths

    files = capture.files()
    if not files:
        note = capture.error or (
            "no profiler trace was written: the job ended before the profiler's active steps"
        )
        return dataclasses.replace(report, warnings=(*report.warnings, note)), None
    summary = analyse_paths([capture.folder])
    if show:
        sys.stderr.write(render_trace(summary, width=width, notes=False))
    stderr_line(f"profiler trace: {files[0]}")
    return fold_trace(report, summary), summary
