"""Report -> JSON (``--json FILE``, ``stepdoctor report --format json``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from stepdoctor._version import __version__
from stepdoctor.model import (
    STRAGGLER_CAUSE,
    STRAGGLER_LOST,
    Checkup,
    Finding,
    JobReport,
    Report,
    to_jsonable,
)

__all__ = [
    "HEADLINE_KEYS",
    "TOOL",
    "checkup_to_dict",
    "findings_to_list",
    "job_to_dict",
    "render_checkup_json",
    "render_job_json",
    "render_json",
    "report_to_dict",
]


#: Who wrote a JSON answer: its first keys, so that other tools can tell it apart.
TOOL = {"tool": "stepdoctor", "tool_version": __version__}


#: A report's keys that come first, after ``TOOL``: how the job ended (a failed job's report
#: says so before anything else) and how firm the evidence is.
HEADLINE_KEYS = (
    "failed",
    "outcome",
    "end_status",
    "exit_code",
    "error",
    "error_at",
    "evidence_note",
)


def report_to_dict(report: Report) -> dict[str, Any]:
    """Return the report as JSON values, how the job ended first; findings in rank order."""
    data: dict[str, Any] = to_jsonable(report)
    head = {key: data.pop(key) for key in HEADLINE_KEYS}
    data["findings"] = [_finding(i, finding) for i, finding in enumerate(data["findings"])]
    return {**TOOL, **head, **data}


def findings_to_list(findings: Sequence[Finding]) -> list[dict[str, Any]]:
    """Findings as JSON values, in the given (rank) order, shaped as in a report."""
    return [_finding(i, to_jsonable(f)) for i, f in enumerate(findings)]


def _finding(index: int, finding: dict[str, Any]) -> dict[str, Any]:
    """A finding with its rank, and its speed-up's figures side by side: ``estimated_speedup``
    (the model's) and ``measured_speedup`` (None when nothing measured it)."""
    speedup, modelled = finding["speedup"], finding.get("modelled")
    measured = speedup["kind"] == "measured"
    model = modelled if measured else speedup
    return {
        "rank": index + 1,
        **finding,
        "estimated_speedup": None if model is None else model["factor"],
        "measured_speedup": speedup["factor"] if measured else None,
    }


def render_json(report: Report) -> str:
    """Return the report as indented JSON text."""
    return json.dumps(report_to_dict(report), indent=2, allow_nan=False) + "\n"


def checkup_to_dict(checkup: Checkup) -> dict[str, Any]:
    """Return the doctor's answer as JSON values: checks, findings (ranked), facts."""
    data: dict[str, Any] = {**TOOL, **to_jsonable(checkup)}
    data["worst"] = None if checkup.worst is None else checkup.worst.value
    data["facts"] = {f.key: f.value for f in checkup.facts}
    data["fact_sources"] = {f.key: f.source for f in checkup.facts}
    data["findings"] = [_finding(i, finding) for i, finding in enumerate(data["findings"])]
    return data


def render_checkup_json(checkup: Checkup) -> str:
    """Return the doctor's answer as indented JSON text."""
    return json.dumps(checkup_to_dict(checkup), indent=2, allow_nan=False) + "\n"


def job_to_dict(job: JobReport) -> dict[str, Any]:
    """Return a distributed job's report as JSON values (docs/job-report.schema.json): the
    job's section first (its verdict ranked, the straggler and its cause, a hang, the ranks'
    table, the ranks' own findings labelled by rank), then each rank's report."""
    straggler = next((f for f in job.findings if f.rule == "stragglers"), None)
    hang = next((f for f in job.findings if f.rule in ("hang", "desync")), None)
    said = {e.metric: e.value for e in straggler.evidence} if straggler else {}
    return {
        **TOOL,
        "kind": "job",
        "schema_version": job.schema_version,
        "job": {
            "folder": job.folder,
            "world_size": job.world_size,
            "ranks_read": [r.meta.rank for r in job.ranks],
            "problems": list(job.problems),
            "verdict": findings_to_list(job.findings),
            "straggler": None
            if straggler is None
            else {
                "rank": straggler.ranks[0],
                "cause": said.get(STRAGGLER_CAUSE),
                "lost_share": said.get(STRAGGLER_LOST),
                "severity": straggler.severity.value,
                "title": straggler.title,
            },
            "hang": None
            if hang is None
            else {"kind": hang.rule, "ranks": list(hang.ranks), "title": hang.title},
            "ranks_table": [_row(row) for row in job.rows],
            "rank_findings": [
                {
                    **_finding(i, to_jsonable(f.finding)),
                    "ranks": list(f.ranks),
                    "every_rank": f.every,
                    "figures_of": f.figures_of,
                    "label": f.label,
                }
                for i, f in enumerate(job.rank_findings)
            ],
        },
        "ranks": [report_to_dict(report) for report in job.ranks],
    }


def _row(row: object) -> dict[str, Any]:
    """A rank's row of the table, without its last collectives and stack (in its report's
    record)."""
    data: dict[str, Any] = to_jsonable(row)
    for key in ("collectives", "last_stack"):
        data.pop(key, None)
    return data


def render_job_json(job: JobReport) -> str:
    """Return a distributed job's report as indented JSON text."""
    return json.dumps(job_to_dict(job), indent=2, allow_nan=False) + "\n"
