"""Report -> JSON (``--json FILE``, ``traindoctor report --format json``)."""

from __future__ import annotations

import json
from typing import Any

from traindoctor.model import Report, to_jsonable

__all__ = ["render_json", "report_to_dict"]


def report_to_dict(report: Report) -> dict[str, Any]:
    """Return the report as JSON values; findings stay in rank order."""
    data: dict[str, Any] = to_jsonable(report)
    data["findings"] = [
        {"rank": i + 1, **finding, "estimated_speedup": finding["speedup"]["factor"]}
        for i, finding in enumerate(data["findings"])
    ]
    return data


def render_json(report: Report) -> str:
    """Return the report as indented JSON text."""
    return json.dumps(report_to_dict(report), indent=2, allow_nan=False) + "\n"
