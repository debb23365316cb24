"""A distributed job's folder (``OUT``: a ``rank-N`` folder per rank) read and judged: its
rows, its findings (a hang, else the straggler and the communication's cost) and the ranks
that could not be read."""

from __future__ import annotations

from pathlib import Path

from stepdoctor.errors import RecordError
from stepdoctor.jobs.comm import comm_findings
from stepdoctor.jobs.hangs import hang_findings
from stepdoctor.jobs.rows import summarise_job
from stepdoctor.jobs.stragglers import job_findings
from stepdoctor.model import Finding, RankRow, RunRecord
from stepdoctor.probes.ranks import rank_dirs
from stepdoctor.record import load_run

__all__ = ["is_job_dir", "judge_job", "load_or_none", "rank_record"]


def judge_job(
    job: Path, *, executor: str = "process", scheduler: str | None = None
) -> tuple[list[RankRow], list[Finding], list[str]]:
    """The job's rows (its ranks' records read by ``summarise_job``: the map), its findings
    judged from them together (the reduce) and a line for each rank that could not be read."""
    rows, problems = summarise_job(job, executor=executor, scheduler=scheduler)
    findings = hang_findings(rows) or [*job_findings(rows), *comm_findings(rows)]
    return rows, findings, list(problems)


def is_job_dir(path: Path) -> bool:
    """Whether ``path`` is a distributed job's folder: no record of its own, ranks' folders."""
    return path.is_dir() and not (path / "run.jsonl").exists() and bool(rank_dirs(path))


def rank_record(job: Path) -> RunRecord | None:
    """The record of the job's lowest rank that can be read (its report is shown in full)."""
    for folder in rank_dirs(job):
        found = load_or_none(folder)
        if found is not None:
            return found
    return None


def load_or_none(folder: Path) -> RunRecord | None:
    """The run record in ``folder``, or None where there is none that can be read."""
    try:
        return load_run(folder)
    except (RecordError, OSError):
        return None
