"""A distributed job as terminal text: the job first (the table of its ranks and its verdict),
then its ranks' own findings labelled by rank; and what its records say of a stall while it
waits."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from stepdoctor.model import Finding, JobReport, RankRow, RunRecord
from stepdoctor.render.json import render_job_json
from stepdoctor.render.names import rank_cells
from stepdoctor.render.text import render_findings

__all__ = [
    "JOB_FORMATS",
    "JOB_HEADING",
    "RANKS_HEADING",
    "rank_table",
    "render_job",
    "render_job_as",
    "render_job_report",
    "render_stall",
]

#: The heading of the job's own verdict (its findings, or that there are none).
JOB_HEADING = "The job, all ranks together:"
#: The heading of the ranks' own findings, after the job's.
RANKS_HEADING = "Each rank's own findings (said once where several ranks say the same):"


#: The formats a distributed job's report is written in (``render_job_as``).
JOB_FORMATS = ("text", "json", "html")


def render_job_as(
    name: str, job: JobReport, first: RunRecord | None = None, *, width: int = 100
) -> str:
    """A distributed job's report in format ``name`` (``JOB_FORMATS``); the HTML page shows
    ``first``, the lowest rank read, in detail after the job (only HTML reads it).

    Raises:
        ValueError: an unknown format, or HTML without ``first``.
    """
    if name == "json":
        return render_job_json(job)
    if name == "html":
        if first is None:
            raise ValueError("a job's page shows its lowest rank in detail: pass its record")
        from stepdoctor.render.html import render_job_html

        return render_job_html(job, first)
    if name == "text":
        return render_job_report(job, width=width)
    raise ValueError(f"a job's report is {', '.join(JOB_FORMATS)}, not {name!r}")


def render_job_report(job: JobReport, *, width: int = 100) -> str:
    """The job's report as terminal text: what it is, the ranks' table and the job's verdict
    (``render_job``), then the ranks' own findings labelled by rank and the ranks that could
    not be read."""
    size = f"world size {job.world_size}" if job.world_size else "world size not recorded"
    head = f"\nDistributed job: {len(job.ranks)} rank(s) read ({size}), records in {job.folder}\n"
    text = head + render_job(job.rows, job.findings, width=width)
    labelled = [f.labelled() for f in job.rank_findings]
    if labelled:
        text += "\n" + render_findings(labelled, width=width, heading=RANKS_HEADING)
    elif job.ranks:
        text += f"\n{RANKS_HEADING}\nNone: no rank's own report has a finding.\n"
    for problem in job.problems:
        text += f"not read: {problem}\n"
    return text


def render_job(rows: Sequence[RankRow], findings: Sequence[Finding], *, width: int = 100) -> str:
    """The table of the ranks, then the job's findings under ``JOB_HEADING``."""
    verdict = render_findings(list(findings), width=width, heading=JOB_HEADING)
    # with nothing found the findings' own heading is left out: the job's still says whose
    # verdict follows (after the ranks' table, not rank 0's report)
    return rank_table(rows) + (verdict if findings else f"{JOB_HEADING}\n{verdict}")


def rank_table(rows: Sequence[RankRow]) -> str:
    """One line per rank: steps, mean step, throughput, data wait, all-reduce time (DDP's
    own) and the host."""
    lines = [
        "",
        "Ranks",
        "rank  steps  mean step  samples/s  data wait  all-reduce  host",
    ]
    for row in rows:
        c = rank_cells(row, "-")
        lines.append(
            f"{c['rank']:>4}  {c['steps']:>5}  {c['mean step']:>9}  {c['samples/s']:>9}  "
            f"{c['data wait']:>9}  {c['all-reduce']:>10}  {c['host']}"
        )
    return "\n".join(lines) + "\n\n"


def render_stall(
    steps: Mapping[int, int],
    idle_s: float,
    rows: Sequence[RankRow],
    findings: Sequence[Finding],
    *,
    width: int = 100,
) -> str:
    """A stall, told while the job waits: the steps each rank made, then the rank the others
    wait for where one stands out (``findings``), else each rank's last phase."""
    counts = ", ".join(f"rank {r}: {n}" for r, n in sorted(steps.items()))
    head = (
        f"\n[stepdoctor] no rank has completed a step for {idle_s:.0f} s "
        f"(steps so far: {counts}); the job is still running.\n"
    )
    if not findings:
        phases = ", ".join(f"rank {r.rank} in '{r.last_phase or 'unknown'}'" for r in rows)
        return head + f"[stepdoctor] their last samples: {phases}.\n"
    return head + render_findings(list(findings), width=width, heading="The job, while it waits:")
