"""``stepdoctor run --nproc-per-node N``: run N ranks through torch.distributed.run, each
watched by ``stepdoctor run`` in its own process, then report the job from their records."""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from stepdoctor.cli._common import error_line
from stepdoctor.errors import UsageError
from stepdoctor.jobs.stall import StallWatch, stall_findings
from stepdoctor.jobs.verdict import job_report, load_or_none, rank_record
from stepdoctor.probes.flight import STALL_VARIABLE
from stepdoctor.probes.ranks import RANK_DIR_PREFIX, rank_dirs, rank_from_env
from stepdoctor.render.formats import RENDERERS, RenderInput
from stepdoctor.render.job import render_job_as, render_job_report, render_stall
from stepdoctor.report import build_report
from stepdoctor.watching import stderr_line

__all__ = ["POLL_S", "launch"]

#: How often the launcher looks at its ranks' records (they are flushed every second).
POLL_S = 1.0


def launch(args: argparse.Namespace, out: Path, target: list[str]) -> int:
    """Run ``target`` (a script or ``-m module``, then its arguments) as
    ``args.nproc_per_node`` ranks; return torchrun's exit code.

    Raises:
        UsageError: options that measure one process, a process that is already a rank, or
            no torch to launch with.
    """
    if args.experiments or args.verify:
        raise UsageError(
            "--experiments and --verify measure one process: run them without --nproc-per-node"
        )
    if rank_from_env() is not None:
        raise UsageError(
            "this process is already a rank (torchrun started it): drop --nproc-per-node"
        )
    if args.nproc_per_node < 1:
        raise UsageError("--nproc-per-node must be 1 or more")
    if importlib.util.find_spec("torch") is None:
        raise UsageError("--nproc-per-node launches through torch.distributed.run: install torch")
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone",
        f"--nproc-per-node={args.nproc_per_node}",
        "-m", "stepdoctor", "run", "--no-report", "--out", str(out),
        "--interval", str(args.interval), "--stacks", args.stacks,
        *(["--log-every", str(args.log_every)] if args.log_every else []),
        *(["--trace"] if args.trace else []),
        *target,
    ]  # fmt: skip
    stderr_line(
        f"launching {args.nproc_per_node} ranks through torch.distributed.run; "
        f"each rank's record in {out}/{RANK_DIR_PREFIX}N"
    )
    code = _run_watched(command, out, args)
    folders = rank_dirs(out)
    alone = (out / "run.jsonl").is_file()  # a world of one is no distributed job: one record
    if not folders and not alone:
        error_line(f"no rank wrote a record under {out} (torch.distributed.run exit code {code})")
        return code or 1
    if alone:
        _report_alone(out, args)
        return code
    job = job_report(out)
    if not args.no_report:
        sys.stderr.write(render_job_report(job, width=args.width))
    first = rank_record(out) if args.html_path is not None else None  # the page's detail
    for name, path in (("json", args.json_path), ("html", args.html_path)):
        if path is None:
            continue
        if not job.ranks or (name == "html" and first is None):
            error_line(f"no rank's record under {out} could be read: {path} not written")
            continue
        path.write_text(render_job_as(name, job, first), encoding="utf-8")
    stderr_line(f"ranks' records: {out}")
    return code


def _report_alone(out: Path, args: argparse.Namespace) -> None:
    """A world of one rank: its report, as a single run's."""
    record = load_or_none(out)
    if record is None:
        error_line(f"the record in {out} could not be read")
        return
    view = RenderInput(record=record, report=build_report(record), width=args.width)
    if not args.no_report:
        sys.stderr.write(RENDERERS["text"].render(view))
    for name, path in (("json", args.json_path), ("html", args.html_path)):
        if path is not None:
            path.write_text(RENDERERS[name].render(view), encoding="utf-8")
    stderr_line(f"run record: {out / 'run.jsonl'} (a world of one rank)")


def _run_watched(command: list[str], out: Path, args: argparse.Namespace) -> int:
    """Run the launcher, telling a stall of every rank while it lasts (``jobs.stall``)."""
    watch = StallWatch(out, args.nproc_per_node, args.stall_after)
    # the ranks read their flight recorders once their steps stall for half of this
    proc = subprocess.Popen(command, env={**os.environ, STALL_VARIABLE: str(args.stall_after)})
    try:
        while True:
            try:
                return proc.wait(timeout=POLL_S)
            except subprocess.TimeoutExpired:
                pass
            if args.stall_after > 0 and watch.poll():
                try:
                    rows, findings = stall_findings(out)
                    text = render_stall(watch.steps, watch.idle_s, rows, findings, width=args.width)
                    sys.stderr.write(text)
                except Exception as exc:  # never stop the job over our own bug
                    error_line(f"the ranks' records could not be read for the stall: {exc!r}")
    except KeyboardInterrupt:  # the launcher got it too (one process group): let it stop
        return proc.wait()
