"""The table of output formats: one signature, the CLI's choices, the diagnosis only where
a format reads it."""

from __future__ import annotations

import json

import pytest

from stepdoctor.cli import build_parser
from stepdoctor.render import render_json, render_text
from stepdoctor.render.formats import RENDERERS, RenderInput
from stepdoctor.report import build_report
from tests.builders import record, samples, steps


def _input() -> RenderInput:
    s = steps(60, phases_ms={"data_wait": 12, "forward": 10, "backward": 20})
    rec = record(s, system=samples(s))
    return RenderInput(record=rec, report=build_report(rec), width=80)


def test_report_command_offers_exactly_the_tables_formats() -> None:
    parser = build_parser()
    for name in RENDERERS:
        assert parser.parse_args(["report", "run", "--format", name]).format == name
    with pytest.raises(SystemExit):
        parser.parse_args(["report", "run", "--format", "flamegraph"])
    assert tuple(RENDERERS) == ("text", "json", "html", "perfetto", "speedscope")  # --help's


def test_every_format_renders_through_the_one_signature() -> None:
    x = _input()
    assert x.report is not None
    assert RENDERERS["text"].render(x) == render_text(x.report, width=80)
    assert RENDERERS["json"].render(x) == render_json(x.report)
    assert RENDERERS["html"].render(x).startswith("<!DOCTYPE html>")
    assert "traceEvents" in json.loads(RENDERERS["perfetto"].render(x))


def test_only_the_exports_render_without_a_diagnosis() -> None:
    x = RenderInput(record=_input().record)
    without = [name for name, r in RENDERERS.items() if not r.needs_report]
    assert without == ["perfetto", "speedscope"]
    assert all(RENDERERS[name].render(x) for name in without)
    with pytest.raises(ValueError, match="diagnosis"):
        RENDERERS["text"].render(x)
