"""Renderers: Report -> text / JSON. They format; they never compute."""

from __future__ import annotations

from traindoctor.render.json import render_json, report_to_dict
from traindoctor.render.text import render_text

__all__ = ["render_json", "render_text", "report_to_dict"]
