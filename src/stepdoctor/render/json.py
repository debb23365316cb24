"""Report -> JSON (``--json FILE``, ``stepdoctor report --format json``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from stepdoctor._version import __version__
from stepdoctor.model import Checkup, Finding, Report, to_jsonable

__all__ = [
    "HEADLINE_KEYS",
    "TOOL",
    "checkup_to_dict",
    "findings_to_list",
    "render_checkup_json",
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
