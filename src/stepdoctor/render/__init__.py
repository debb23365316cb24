"""Renderers: Report -> text / JSON. They format; they never compute."""

from __future__ import annotations

from stepdoctor.render.json import (
    checkup_to_dict,
    findings_to_list,
    render_checkup_json,
    render_json,
    report_to_dict,
)
from stepdoctor.render.text import render_checkup_text, render_findings, render_text

__all__ = [
    "checkup_to_dict",
    "findings_to_list",
    "render_checkup_json",
    "render_checkup_text",
    "render_findings",
    "render_json",
    "render_text",
    "report_to_dict",
]
