"""A distributed job's folder (``OUT``: a ``rank-N`` folder per rank) read and judged: its
rows, its findings (a hang, else the straggler and the communication's cost), each rank's
report and the ranks that could not be read."""

from __future__ import annotations

import re
from pathlib import Path

from stepdoctor.errors import RecordError
from stepdoctor.jobs.comm import comm_findings
from stepdoctor.jobs.hangs import hang_findings
from stepdoctor.jobs.rows import summarise_job
from stepdoctor.jobs.stragglers import job_findings
from stepdoctor.model import (
    SCHEMA_VERSION,
    Finding,
    JobReport,
    RankFinding,
    Report,
    RunRecord,
    Severity,
)
from stepdoctor.probes.ranks import rank_dirs
from stepdoctor.record import load_run
from stepdoctor.rules import rank

__all__ = [
    "is_job_dir",
    "job_report",
    "load_or_none",
    "rank_findings",
    "rank_record",
]


def job_report(job: Path, *, executor: str = "process", scheduler: str | None = None) -> JobReport:
    """The job's report: its ranks' records read by ``summarise_job`` (the map: a row and a
    report each), its findings judged from the rows together (the reduce), each rank's report
    and a line for each rank that could not be read."""
    rows, reports, problems = summarise_job(job, executor=executor, scheduler=scheduler)
    findings = hang_findings(rows) or [*job_findings(rows), *comm_findings(rows)]
    sizes = [r.meta.world_size for r in reports.values() if r.meta.world_size]
    return JobReport(
        schema_version=SCHEMA_VERSION,
        folder=str(job),
        world_size=max(sizes) if sizes else None,
        rows=tuple(rows),
        findings=tuple(rank(findings)),
        rank_findings=tuple(rank_findings(reports)),
        ranks=tuple(reports[r] for r in sorted(reports)),
        problems=tuple(problems),
    )


def rank_findings(reports: dict[int, Report]) -> list[RankFinding]:
    """The ranks' findings, ranked, each labelled by the ranks that made it: a finding that
    several ranks make (the same rule and severity, its title the same but for its figures)
    is said once, as "every rank" where every rank read made it, with the figures of the rank
    whose fix saves the most (each rank's own are in its report); the rest rank by rank."""
    alike: dict[tuple[str, Severity, str], dict[int, list[Finding]]] = {}
    for number, report in sorted(reports.items()):
        for finding in report.findings:
            key = (finding.rule, finding.severity, _FIGURES.sub("#", finding.title))
            alike.setdefault(key, {}).setdefault(number, []).append(finding)
    said = []
    for found in alike.values():
        # the figures of the rank whose fix saves the most (the lowest rank among equals)
        most = min(found, key=lambda n: (-max(f.speedup.factor for f in found[n]), n))
        said += [
            RankFinding(
                ranks=tuple(sorted(found)),
                every=len(reports) > 1 and set(found) == set(reports),
                figures_of=most,
                finding=finding,
            )
            for finding in found[most]
        ]
    order = {id(f): i for i, f in enumerate(rank([s.finding for s in said]))}
    return sorted(said, key=lambda s: order[id(s.finding)])


#: A title's figures (``23%``, ``1.5 s``, ``rank 1``), which differ between ranks saying the same.
_FIGURES = re.compile(r"\d[\d.,]*")


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
