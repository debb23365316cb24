"""The HTML report as data (what the page is handed), its escaping of hostile strings, its
size on a one-hour run, and a snapshot of the terminal report at a fixed width."""

from __future__ import annotations

import dataclasses
import html
import json
import re
import shutil
from pathlib import Path

import pytest

from stepdoctor.model import (
    Evidence,
    Finding,
    Fix,
    ModelInfo,
    ProcessUsage,
    ProfiledSpan,
    Severity,
    Speedup,
)
from stepdoctor.render import render_text
from stepdoctor.render.html import html_context, render_html
from stepdoctor.report import build_report
from stepdoctor.timeline import MAX_POINTS
from tests.builders import env, meta, record, samples, stacked, steps
from tests.marks import needs_torch

HOSTILE = "<script>alert(1)</script>"
QUOTED = '/data/it\'s "here"/train.py'


def _hostile_record():  # type: ignore[no-untyped-def]
    s = steps(300, phases_ms={"data_wait": 2, "forward": 10, "backward": 20},
              every={97: {"forward": 400}})  # fmt: skip
    # Another process burns 3 of the 4 cores under a hostile name: competing-processes names it.
    system = tuple(
        dataclasses.replace(x, other_cpu_pct=300.0, cpu_pct_per_core=(100.0,) * 4,
                            top_others=(ProcessUsage(pid=7, name=HOSTILE, cpu_pct=300.0),))
        for x in samples(s)
    )  # fmt: skip
    model = ModelInfo(model_id=1, class_name=f"Net{HOSTILE}", param_count=10, param_bytes=40)
    rec = record(s, system=system, facts=env(torch__version=HOSTILE), models=(model,))
    rec = stacked(rec, {"forward": [(("<module>", "train", HOSTILE), 40)]})
    return dataclasses.replace(
        rec, meta=dataclasses.replace(meta(), command=(QUOTED, "--tag", HOSTILE))
    )


def test_page_data_has_verdict_plots_and_facts() -> None:
    rec = _hostile_record()
    report = build_report(rec)
    ctx = html_context(rec, report)
    assert [f["rule"] for f in ctx["findings"]] == [f.rule for f in report.findings]
    assert all(f["speedup"] for f in ctx["findings"])  # the figure and its basis, in words
    steps_plot = ctx["plots"]["steps"]
    assert steps_plot["bucket"] == 1 and len(steps_plot["x"]) == 300
    assert {p["name"] for p in steps_plot["phases"]} == {"data wait (ETL)", "forward",
                                                         "backward"}  # fmt: skip
    # The planted slow steps (every 97th: 432 ms against 32) are the outliers.
    assert [o["x"] for o in steps_plot["outliers"]] == [96, 193, 290]
    assert ctx["plots"]["system"]["other processes CPU"][0] == 300.0
    # The competing processes ran the whole time: the finding's band covers the samples the
    # rules judge, from the end of the warm-up (30 steps of 32 ms) to the last.
    (mark,) = [m for m in ctx["plots"]["marks"] if m["rule"] == "competing-processes"]
    warmup_s = ctx["summary"]["warmup_steps"] * 0.032
    assert warmup_s <= mark["start"] <= warmup_s + 0.1
    assert mark["end"] == ctx["plots"]["system"]["t"][-1]
    assert ctx["facts"] == [{"key": "torch.version", "value": HOSTILE, "source": ""}]
    assert json.dumps(ctx)  # plain JSON values


def test_hostile_strings_are_escaped() -> None:
    rec = _hostile_record()
    page = render_html(rec, build_report(rec))
    assert "competing-processes" in page  # the finding that names the process is there
    assert HOSTILE not in page  # nowhere as markup...
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page  # ...but shown, escaped
    assert "it&#39;s &#34;here&#34;" in page  # markupsafe's spelling (Jinja autoescape)
    # The plot data cannot close its script element.
    data = re.search(r'<script type="application/json" id="td-data">(.*?)</script>', page, re.S)
    assert data is not None and "<" not in data.group(1)
    assert page.count("<script") == 3  # Chart.js, the data, the page's own script


SCRIPT_END = "</script><script>alert(2)</script>"


def test_user_data_in_every_part_of_the_page_is_escaped_by_the_template() -> None:
    s = steps(100, phases_ms={"forward": 10, f"user phase {SCRIPT_END}": 5})
    rec = record(s, system=samples(s), models=(
        ModelInfo(model_id=1, class_name=f"Net{HOSTILE}{SCRIPT_END}", param_count=1,
                  param_bytes=4),
    ))  # fmt: skip
    rec = dataclasses.replace(
        rec, meta=dataclasses.replace(meta(), command=("train.py", HOSTILE, SCRIPT_END))
    )
    finding = Finding(
        rule="planted",
        severity=Severity.WARNING,
        title=f"title {HOSTILE}",
        explanation=f"why {SCRIPT_END}",
        evidence=(Evidence(metric=f"metric {HOSTILE}", value=SCRIPT_END, unit="ms"),),
        speedup=Speedup(factor=1.5, basis="planted"),
        fix=Fix(summary=f"fix {HOSTILE}", snippet=f"print({SCRIPT_END})"),
    )
    report = dataclasses.replace(
        build_report(rec), findings=(finding,), warnings=(f"note {SCRIPT_END}",)
    )
    page = render_html(rec, report)
    assert HOSTILE not in page and SCRIPT_END not in page
    assert "alert(1)" in page and "alert(2)" in page  # shown, not dropped...
    assert page.count("<script") == 3 and page.count("</script>") == 3  # ...and never markup
    for shown in (f"title {HOSTILE}", f"fix {HOSTILE}", f"why {SCRIPT_END}", f"note {SCRIPT_END}",
                  f"metric {HOSTILE}", f"Net{HOSTILE}{SCRIPT_END}",
                  f"train.py {HOSTILE} {SCRIPT_END}", f"print({SCRIPT_END})"):  # fmt: skip
        assert html.escape(shown, quote=False) in page, shown
    data = re.search(r'<script type="application/json" id="td-data">(.*?)</script>', page, re.S)
    assert data is not None and "<" not in data.group(1)
    names = {p["name"] for p in json.loads(data.group(1))["steps"]["phases"]}
    assert f"user phase {SCRIPT_END}" in names  # the JSON still carries the string intact


@pytest.mark.no_cover
def test_one_hour_run_stays_small_and_keeps_outliers() -> None:
    n = 100_000  # ~36 ms a step: one hour
    s = steps(n, phases_ms={"data_wait": 1, "forward": 12, "backward": 23},
              every={33_333: {"backward": 900}})  # fmt: skip
    rec = record(s, system=samples(s, every_ms=100))  # 36,000 samples
    report = build_report(rec)
    page = render_html(rec, report)
    assert len(page.encode()) < 5 * 2**20
    ctx = html_context(rec, report)
    plot = ctx["plots"]["steps"]
    assert plot["bucket"] > 1 and len(plot["x"]) <= MAX_POINTS
    assert max(plot["max"]) == 936.0  # a single slow step survives bucketing
    assert len(ctx["plots"]["system"]["t"]) <= MAX_POINTS
    assert "Each point is a bucket of" in page  # the page says it is downsampled


def test_terminal_report_snapshot_at_fixed_width() -> None:
    s = steps(120, phases_ms={"data_wait": 12, "forward": 10, "backward": 20})
    rec = record(s, system=samples(s))
    text = render_text(build_report(rec), width=80)
    expected = (_snapshot_path()).read_text()
    assert text == expected, "terminal report changed: review, then UPDATE_SNAPSHOTS=1"


def _snapshot_path():  # type: ignore[no-untyped-def]
    import os
    from pathlib import Path

    path = Path(__file__).parent / "snapshots" / "report_width80.txt"
    if os.environ.get("UPDATE_SNAPSHOTS"):
        s = steps(120, phases_ms={"data_wait": 12, "forward": 10, "backward": 20})
        path.parent.mkdir(exist_ok=True)
        path.write_text(render_text(build_report(record(s, system=samples(s))), width=80))
    return path


@needs_torch
def test_saved_run_with_a_profiler_trace_shows_its_tables(tmp_path: Path) -> None:
    from stepdoctor.cli import main
    from tests.cli.test_cli import _run
    from tests.traces.test_oracle import TRACES

    source = TRACES / "hta_nccl_a100_r0of2"
    if not source.exists():
        pytest.skip("shared/traces is not available here")
    assert _run(tmp_path).returncode == 0
    trace_dir = tmp_path / "run" / "trace"
    trace_dir.mkdir()
    for f in source.iterdir():
        shutil.copy(f, trace_dir / f.name)
    out = tmp_path / "report.html"
    assert main(["report", str(tmp_path / "run"), "--format", "html", "-o", str(out)]) == 0
    page = out.read_text()
    assert "Profiler trace: GPU time per rank" in page
    assert "14.31%" in page  # the trace's comm/comp overlap (HTA's number)
    assert 'data-rule="gpu-idle"' in page  # the trace's finding joined the run's
    assert main(["report", str(tmp_path / "run"), "--format", "json", "-o",
                 str(tmp_path / "r.json")]) == 0  # fmt: skip
    rules = {f["rule"] for f in json.loads((tmp_path / "r.json").read_text())["findings"]}
    assert "gpu-idle" in rules


def test_the_steps_under_stepdoctors_profiler_are_a_band_of_their_own() -> None:
    s = steps(300, phases_ms={"forward": 10})
    span = ProfiledSpan(start_ns=s[10].start_ns, end_ns=s[16].end_ns)
    rec = record(s, system=samples(s), profiled=(span,))
    ctx = html_context(rec, build_report(rec))
    (band,) = [m for m in ctx["plots"]["marks"] if m["kind"] == "profiler"]
    origin = ctx["plots"]["system"]["t"][0] - samples(s)[0].t_ns / 1e9  # the plots' zero
    assert band["start"] == pytest.approx(s[10].start_ns / 1e9 + origin, abs=1e-3)
    assert band["end"] == pytest.approx(s[16].end_ns / 1e9 + origin, abs=1e-3)
    assert all(m["kind"] == "finding" for m in ctx["plots"]["marks"] if m is not band)
