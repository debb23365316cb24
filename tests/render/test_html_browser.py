"""The HTML report in a real browser (Debian's Chromium, driven by Playwright): no console
errors, every plot drawn (its canvas has ink), hostile strings never run, and a screenshot
kept in test-artifacts/ for a person to look at."""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import pytest

from stepdoctor.collect.sampling.readers import IO_EVERY_NS
from stepdoctor.model import ProfiledSpan
from stepdoctor.record import load_run
from stepdoctor.render.html import render_html
from stepdoctor.report import build_report
from tests.marks import needs_module, needs_torch
from tests.render.test_html import HOSTILE, _hostile_record
from tests.shared_data import LOGS
from tests.test_compare import _real_run

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
#: Flags for a headless Chromium as root on a machine with no outside network (the machine
#: notes: without the background-networking flags it keeps trying to reach Google's hosts).
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update",
         "--disable-sync"]  # fmt: skip
ARTIFACTS = Path(
    os.environ.get("STEPDOCTOR_ARTIFACTS", Path(__file__).parents[2] / "test-artifacts")
)

pytestmark = [
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="chromium is not installed (make browser installs Debian's package)",
    ),
    needs_module("playwright", "it drives Chromium"),
]

#: Share of a canvas's pixels that must be drawn for a plot to count as rendered.
INK = 0.01
_INK_JS = """() => window.tdCharts.map(c => {
  const canvas = c.canvas, ctx = canvas.getContext("2d");
  const data = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
  let ink = 0;
  for (let i = 3; i < data.length; i += 4) if (data[i] > 0) ink++;
  const points = c.data.datasets.reduce((n, d) => n + d.data.filter(p => p.y != null).length, 0);
  const labels = c.data.datasets.filter(d => d.data.some(p => p.y != null)).map(d => d.label);
  return {id: canvas.id, ink: ink / (canvas.width * canvas.height), points: points,
          labels: labels};
})"""


_FLAME_JS = """() => ({
  phases: window.tdFlame ? window.tdFlame.phases : [],
  boxes: [...document.querySelectorAll('#flame .fl')].map(e => e.textContent),
  height: document.getElementById('flame').getBoundingClientRect().height,
})"""


def _open(
    page_path: Path, screenshot: Path, flame: dict[str, object] | None = None
) -> tuple[list[str], list[dict[str, object]], list[str], str]:
    """The page's console problems, each plot's ink, the dialogs it opened and the note under
    the system plots (and in ``flame``, what its flame graph drew)."""
    from playwright.sync_api import sync_playwright

    problems: list[str] = []
    dialogs: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("console", lambda m: problems.append(f"{m.type}: {m.text}")
                    if m.type in ("error", "warning") else None)  # fmt: skip
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(page_path.as_uri())
            page.wait_for_function("window.tdReady === true", timeout=15_000)
            ink = page.evaluate(_INK_JS)
            note = page.inner_text("#system-note")
            if flame is not None:
                flame.update(page.evaluate(_FLAME_JS))
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(screenshot), full_page=True)
        finally:
            browser.close()
    return problems, ink, dialogs, note


@needs_torch
def test_report_of_a_real_run_renders_in_chromium(tmp_path: Path) -> None:
    # A DataLoader loop of 128 steps asleep 2.5 I/O periods in all: disk and network are read
    # every IO_EVERY_NS (2 s) from the monitor's first sample on, and the I/O plot needs two
    # readings (at 1.3 periods, a monitor that sampled late on a busy machine took one).
    rec = load_run(_real_run(tmp_path, "run", 2.5 * IO_EVERY_NS / 1e9 / 128))
    # as if run --trace had profiled steps 40-46: their band is drawn and named
    span = ProfiledSpan(start_ns=rec.steps[40].start_ns, end_ns=rec.steps[46].end_ns)
    rec = dataclasses.replace(rec, profiled=(span,))
    page = tmp_path / "report.html"
    page.write_text(render_html(rec, build_report(rec)))
    flame: dict[str, object] = {}
    problems, ink, dialogs, note = _open(page, ARTIFACTS / "html-report-real-run.png", flame)
    assert problems == [] and dialogs == []
    assert "Blue band: stepdoctor's own measurement" in note
    # the run's sampled stacks: a flame graph per phase, the busiest drawn
    assert flame["phases"] and flame["boxes"] and flame["height"] > 0
    ids = {c["id"] for c in ink}
    assert {"steps", "throughput", "cpu", "memory", "io"} <= ids
    thin = [c for c in ink if c["ink"] < INK or not c["points"]]
    assert not thin, f"plots with (almost) nothing drawn: {thin}"
    assert (ARTIFACTS / "html-report-real-run.png").stat().st_size > 10_000


def test_hostile_strings_do_not_run_in_the_browser(tmp_path: Path) -> None:
    rec = _hostile_record()
    page = tmp_path / "hostile.html"
    page.write_text(render_html(rec, build_report(rec)))
    flame: dict[str, object] = {}
    problems, ink, dialogs, note = _open(page, ARTIFACTS / "html-report-hostile.png", flame)
    assert dialogs == []  # alert(1) never ran
    assert HOSTILE in flame["boxes"]  # the function's name drawn as text, not markup
    assert "Red bands" in note and "Blue band" not in note  # no --trace, no profiler band
    assert problems == []
    assert all(c["ink"] >= INK and c["points"] for c in ink)
    assert "io" not in {c["id"] for c in ink}  # no disk/network readings: no empty plot


def test_a_run_with_no_steps_or_samples_gives_a_page_without_empty_plots(tmp_path: Path) -> None:
    from tests.builders import record

    rec = record(())
    page = tmp_path / "empty.html"
    page.write_text(render_html(rec, build_report(rec)))
    problems, ink, dialogs, _ = _open(page, ARTIFACTS / "html-report-empty.png")
    assert problems == [] and dialogs == [] and ink == []


def test_a_jvm_jobs_logs_render_their_gc_plots_with_hostile_names_escaped(tmp_path: Path) -> None:
    """stepdoctor logs --html: a real CMS log's pauses and heap (GCViewer's sample, 3,409
    pauses), beside a log whose file name and collection cause are markup."""
    from stepdoctor.logs import read_logs

    corpus = LOGS / "gc" / "gcviewer"
    if not corpus.exists():
        pytest.skip(f"{corpus} is not available here (set STEPDOCTOR_SHARED to the folder)")
    hostile_name = "<img src=x onerror=alert(1)>.log"
    hostile = tmp_path / hostile_name
    hostile.write_text(
        "".join(
            f"{t}.000: [Full GC (<img src=x onerror=alert`2`>) [PSYoungGen: 100K->0K(200K)] "
            f"[ParOldGen: 900K->800K(1000K)] 1000K->800K(1200K), 0.1{t:02d}0000 secs]\n"
            for t in range(1, 13)
        )
    )
    read = read_logs([str(corpus / "SampleSun1_5_0ConcurrentModeFailure.txt"), str(hostile)])
    page = tmp_path / "logs.html"
    page.write_text(render_html(read.record, build_report(read.record)))
    problems, ink, dialogs, _ = _open(page, ARTIFACTS / "html-report-jvm-logs.png")
    assert problems == [] and dialogs == []
    drawn = {c["id"]: c for c in ink}
    assert {"jvm0-pauses", "jvm0-heap", "jvm1-pauses", "jvm1-heap"} <= set(drawn)
    assert all(c["ink"] >= INK and c["points"] for c in drawn.values())
    # 3,409 pauses thinned to the page's limit (1,500 points): one in 3
    assert drawn["jvm0-pauses"]["points"] == -(-3409 // 3)
    text = page.read_text()
    assert hostile_name not in text and "&lt;img src=x onerror=alert(1)&gt;.log" in text


def test_a_dl4j_log_beside_its_gc_log_plots_its_iterations_with_their_gc_pauses(
    tmp_path: Path,
) -> None:
    """stepdoctor logs --html with a DL4J log and its GC log, both with wall-clock times:
    the iteration-time plot has the GC pauses that fell in each iteration as a series of its
    own, beside the GC log's pause and heap plots."""
    from stepdoctor.logs import read_logs

    train = tmp_path / "train.log"
    train.write_text(
        "".join(
            f"2021-01-01 00:00:{i // 10:02d}.{i % 10}00 INFO o.d.o.l.PerformanceListener - "
            f"iteration {i}; iteration time: 100 ms; samples/sec: 320.000; batches/sec: "
            f"10.000; ETL: 0 ms;\n"
            for i in range(1, 140)
        )
    )
    gc = tmp_path / "gc.log"
    gc.write_text(
        "".join(
            f"2021-01-01T00:00:{s:02d}.250+0100: {s}.250: [GC (Allocation Failure) "
            f"[PSYoungGen: 1000K->100K(2000K)] 3000K->2100K(9000K), 0.1000000 secs]\n"
            for s in range(1, 13)
        )
    )
    read = read_logs([str(train), str(gc)])
    page = tmp_path / "aligned.html"
    page.write_text(render_html(read.record, build_report(read.record)))
    problems, ink, dialogs, _ = _open(page, ARTIFACTS / "html-report-dl4j-gc.png")
    assert problems == [] and dialogs == []
    drawn = {c["id"]: c for c in ink}
    assert {"steps", "jvm0-pauses", "jvm0-heap"} <= set(drawn)
    assert all(c["ink"] >= INK and c["points"] for c in drawn.values())
    assert "GC pauses" in drawn["steps"]["labels"], drawn["steps"]
