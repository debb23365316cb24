"""The command line, run for real in subprocesses (a job's exit code must pass through)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import stepdoctor
from stepdoctor.cli import build_parser, main
from tests._zygote import stepdoctor_run
from tests.marks import needs_torch

TRAIN = """
import sys, torch
model = torch.nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(30):
    opt.zero_grad(); model(torch.randn(16, 8)).sum().backward(); opt.step()
print("argv", sys.argv[1:], "name", __name__)
{tail}
"""


def _run(tmp_path: Path, tail: str = "", *args: str) -> subprocess.CompletedProcess[str]:
    """``stepdoctor run`` the training script ending in ``tail``, forked from a process that
    has imported torch (``tests/_zygote.py``; ``test_failed_runs.py`` runs its jobs as fresh
    processes)."""
    script = tmp_path / "train.py"
    script.write_text(TRAIN.format(tail=tail))
    return stepdoctor_run(
        ["run", "--out", str(tmp_path / "run"), "--json", str(tmp_path / "r.json"), str(script),
         *args],
        timeout=120, cwd=tmp_path, env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )  # fmt: skip


@needs_torch
def test_run_passes_argv_and_writes_record_and_json(tmp_path: Path) -> None:
    proc = _run(tmp_path, "", "--epochs", "3")
    assert proc.returncode == 0, proc.stderr
    assert "argv ['--epochs', '3'] name __main__" in proc.stdout
    assert "Where a step's time goes" in proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["summary"]["steps"] == 30
    assert set(report) >= {"schema_version", "summary", "findings"}
    assert (report["tool"], report["tool_version"]) == ("stepdoctor", stepdoctor.__version__)
    assert (tmp_path / "run" / "run.jsonl").exists()


@needs_torch
def test_job_exception_passes_through_and_record_is_finalised(tmp_path: Path) -> None:
    proc = _run(tmp_path, "raise ValueError('boom')")
    assert proc.returncode == 1
    assert "ValueError: boom" in proc.stderr
    assert "stepdoctor/collect" not in proc.stderr  # the job's traceback, not ours
    assert "job ended: exception" in proc.stderr
    out = subprocess.run(
        [sys.executable, "-m", "stepdoctor", "report", "--format", "json", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(out.stdout)
    assert report["end_status"] == "exception"
    assert report["summary"]["steps"] == 30


@needs_torch
def test_sys_exit_code_passes_through(tmp_path: Path) -> None:
    assert _run(tmp_path, "sys.exit(3)").returncode == 3


@needs_torch
def test_keyboard_interrupt_gives_130(tmp_path: Path) -> None:
    proc = _run(tmp_path, "raise KeyboardInterrupt")
    assert proc.returncode == 130
    assert "job ended: interrupted" in proc.stderr


def test_missing_script_is_one_line(capsys: object, tmp_path: Path) -> None:
    code = main(["run", str(tmp_path / "nope.py")])
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert code == 2
    assert err.strip().count("\n") == 0
    assert "no such script" in err


def test_report_on_corrupt_record_is_one_line(capsys: object, tmp_path: Path) -> None:
    bad = tmp_path / "run.jsonl"
    bad.write_text("not json\n")
    assert main(["report", str(bad)]) == 1
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert (
        err == f"stepdoctor: error: {bad}: corrupt run record at byte 0: the header line "
        "is not JSON (Expecting value: line 1 column 1 (char 0))\n"
    )


def test_version_and_module_entry_point() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "stepdoctor", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.startswith("stepdoctor ")


@needs_torch
def test_run_writes_the_html_report(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(TRAIN.format(tail=""))
    page = tmp_path / "report.html"
    proc = stepdoctor_run(
        ["run", "--out", str(tmp_path / "run"), "--html", str(page), "--no-report", str(script)],
        timeout=120, cwd=tmp_path, env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert f"HTML report: {page}" in proc.stderr
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and "window.Chart=" in text  # library inlined
    assert "http://" not in text.split("<script>", 1)[0]  # nothing fetched by the head


def test_every_commands_help_renders(capsys: pytest.CaptureFixture[str]) -> None:
    """argparse formats each help text with %: a stray % in one (a share printed as "20%")
    made `stepdoctor run --help` end in a traceback."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    commands = list(sub.choices)
    assert "run" in commands
    for name in [None, *commands]:
        with pytest.raises(SystemExit) as ended:
            parser.parse_args(["--help"] if name is None else [name, "--help"])
        assert ended.value.code == 0, name
        assert "usage: stepdoctor" in capsys.readouterr().out, name


def test_run_with_no_report_and_no_output_builds_no_report(tmp_path: Path) -> None:
    """Nothing would show or keep it: the diagnosis and its renderers are not even loaded."""
    job = tmp_path / "job.py"
    job.write_text("print('the job ran')\n")
    code = (
        "import sys; from stepdoctor.cli import main; rc = main(sys.argv[1:]);"
        " print('loaded:', sorted(m for m in ('stepdoctor.report', 'stepdoctor.render')"
        " if m in sys.modules))"
    )
    # nor the model's classes of JVM logs, which a watched job's record does not hold
    unused = "; print('built:', sorted(m for m in ('stepdoctor.model.jvm',) if m in sys.modules))"
    args = ["run", "--no-report", "--out", str(tmp_path / "run"), str(job)]
    proc = subprocess.run(
        [sys.executable, "-c", code + unused, *args], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["the job ran", "loaded: []", "built: []"]
    assert "run record:" in proc.stderr and (tmp_path / "run" / "run.jsonl").exists()
    json_out = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, "-c", code, "run", "--no-report", "--json", str(json_out),
         "--out", str(tmp_path / "run2"), str(job)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.stdout.splitlines()[-1] == "loaded: ['stepdoctor.render', 'stepdoctor.report']"
    assert json.loads(json_out.read_text())["summary"] is not None


#: A loop marked by ``doc.step()`` alone, its phases never timed: ~4 ms of work a step, and a
#: longer one every 20 steps.
UNSPLIT_JOB = """
import sys, time
import stepdoctor

with stepdoctor.watch(sys.argv[1], json_path=sys.argv[2], report=False) as doc:
    for i in range(200):
        end = time.perf_counter() + (0.012 if i % 20 == 19 else 0.004)
        while time.perf_counter() < end:
            pass
        doc.step(batch_size=32)
"""


def test_a_loop_marked_by_doc_step_alone_is_told_nothing_of_between_steps(tmp_path: Path) -> None:
    """All of each step is between phases: no slow-callbacks (it said "Work between steps
    takes 100% of the time", critical, "up to 1000.00x"), the rule's skip saying why, and no
    figure from a share that leaves no other work."""
    script, report = tmp_path / "job.py", tmp_path / "report.json"
    script.write_text(UNSPLIT_JOB)
    proc = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "run"), str(report)],
        capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = json.loads(report.read_text())
    assert said["summary"]["steps"] == 200
    assert "slow-callbacks" not in {f["rule"] for f in said["findings"]}
    (skipped,) = (s for s in said["skipped"] if s["rule"] == "slow-callbacks")
    assert "not split into phases" in skipped["reason"]
    assert all(f["speedup"]["factor"] < 10 for f in said["findings"]), said["findings"]
