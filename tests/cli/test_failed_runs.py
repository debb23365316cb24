"""A failed job's report says so first, under ``stepdoctor run`` and ``stepdoctor report``, and
the job's own exit code passes through (real jobs in processes of their own)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests._zygote import stepdoctor_run
from tests.marks import needs_torch

#: A job that trains for a few steps, then ends as ``{tail}`` says (the line numbers matter:
#: ``{tail}`` is line 8).
JOB = """import sys, time, torch
model = torch.nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(30):
    opt.zero_grad(); model(torch.randn(16, 8)).sum().backward(); opt.step()
print("trained", flush=True)

{tail}
"""
TAIL_LINE = 8
#: Waits for a job to reach a point; generous, as every subprocess timeout here: it bounds a
#: hang, it is not a speed assertion.
PATIENCE_S = 120
_ENV = {**os.environ, "PYTHONWARNINGS": "ignore"}


def _command(tmp_path: Path, tail: str) -> list[str]:
    script = tmp_path / "train.py"
    script.write_text(JOB.format(tail=tail))
    return [
        sys.executable, "-m", "stepdoctor", "run", "--out", str(tmp_path / "run"),
        "--json", str(tmp_path / "r.json"), "--html", str(tmp_path / "r.html"), str(script),
    ]  # fmt: skip


def _run(tmp_path: Path, tail: str) -> subprocess.CompletedProcess[str]:
    """The job run to its end, forked from the test process's zygote (``tests/_zygote.py``:
    its exit, exit code and streams as a fresh process's; the interrupted and killed jobs
    below are fresh processes)."""
    return stepdoctor_run(_command(tmp_path, tail)[3:], env=_ENV, timeout=PATIENCE_S, cwd=tmp_path)


def _report_lines(stderr: str) -> list[str]:
    """The printed report's lines: from the line after ``recording to`` and the job's own
    output (its traceback), which end where the report starts."""
    lines = stderr.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("The job "))
    return lines[start:]


def _saved_report(tmp_path: Path, fmt: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "stepdoctor", "report", "--format", fmt, "--width", "200",
         str(tmp_path / "run")],
        capture_output=True, text=True, check=True, timeout=PATIENCE_S, env=_ENV,
    ).stdout  # fmt: skip


def _html_first_paragraph(page: str) -> str:
    body = page.split("<body>", 1)[1].lstrip()
    assert body.startswith('<p class="failed" id="outcome">'), body[:200]
    return body.split(">", 1)[1].split("</p>", 1)[0]


@needs_torch
def test_exception_is_said_first_with_its_type_and_line(tmp_path: Path) -> None:
    proc = _run(tmp_path, "def fail():\n    raise ValueError('boom')\nfail()")
    assert proc.returncode == 1
    first = _report_lines(proc.stderr)[0]
    assert first.startswith("The job failed (exit code 1): ValueError: boom, raised at train.py:")
    assert f"train.py:{TAIL_LINE + 1}." in " ".join(_report_lines(proc.stderr)[:2])
    data: dict[str, Any] = json.loads((tmp_path / "r.json").read_text())
    assert list(data)[2:5] == ["failed", "outcome", "end_status"]  # after who wrote it
    assert data["failed"] is True
    assert (data["end_status"], data["exit_code"]) == ("exception", 1)
    assert data["error"] == "ValueError: boom"
    assert data["error_at"] == f"train.py:{TAIL_LINE + 1}"
    assert "part of the job that ran" in data["outcome"]
    assert _html_first_paragraph((tmp_path / "r.html").read_text()).startswith(
        "The job failed (exit code 1): ValueError: boom"
    )
    # The saved run says the same, and never an all-clear.
    text = _saved_report(tmp_path, "text")
    assert text.startswith("The job failed (exit code 1): ValueError: boom, raised at train.py:")
    assert "No problems found" not in text and "No findings" not in text


@needs_torch
def test_sys_exit_code_passes_through_and_is_said_first(tmp_path: Path) -> None:
    proc = _run(tmp_path, "sys.exit(3)")
    assert proc.returncode == 3
    lines = _report_lines(proc.stderr)
    assert lines[0].startswith(
        f"The job failed (exit code 3): sys.exit(3), raised at train.py:{TAIL_LINE}."
    )
    data = json.loads((tmp_path / "r.json").read_text())
    assert (data["failed"], data["end_status"], data["exit_code"]) == (True, "exit", 3)
    assert data["error_at"] == f"train.py:{TAIL_LINE}"


@needs_torch
def test_clean_exit_is_no_failure(tmp_path: Path) -> None:
    proc = _run(tmp_path, "sys.exit(0)")
    assert proc.returncode == 0
    data = json.loads((tmp_path / "r.json").read_text())
    assert (data["failed"], data["outcome"], data["error_at"]) == (False, "", "")
    assert not any(line.startswith("The job ") for line in proc.stderr.splitlines())


#: ``python -m stepdoctor ARGS`` taking Ctrl-C as a terminal's job does. A shell starts a
#: background command with SIGINT ignored and its children inherit that: Python then installs
#: no KeyboardInterrupt handler and SIGINT never reaches the job (a suite run as ``make test &``
#: hung here). A shell cannot undo it (``trap`` leaves a signal ignored on entry as it is).
_INTERRUPTIBLE = (
    "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "sys.argv[0] = 'stepdoctor'; runpy.run_module('stepdoctor', run_name='__main__')"
)


def _started(tmp_path: Path, tail: str) -> subprocess.Popen[str]:
    """A job started under ``stepdoctor run``, once it trained and its record holds steps."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _INTERRUPTIBLE, *_command(tmp_path, tail)[3:]],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=_ENV,
    )  # fmt: skip
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "trained"
    deadline = time.monotonic() + PATIENCE_S
    while not _has_steps(tmp_path / "run" / "run.jsonl"):
        assert time.monotonic() < deadline, "the record never received its steps"
        time.sleep(0.1)
    return proc


def _has_steps(record: Path) -> bool:
    if not record.exists():
        return False
    for line in record.read_text().splitlines():
        try:
            if json.loads(line).get("type") == "steps":
                return True
        except ValueError:  # a line being written
            continue
    return False


@needs_torch
def test_ctrl_c_is_said_first_and_gives_130(tmp_path: Path) -> None:
    proc = _started(tmp_path, "while True:\n    time.sleep(0.01)")
    proc.send_signal(signal.SIGINT)
    try:
        _, stderr = proc.communicate(timeout=PATIENCE_S)
    finally:  # a job left running would be a stray child of the tests after this one
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130
    first = _report_lines(stderr)[0]
    assert first.startswith("The job was interrupted (exit code 130): KeyboardInterrupt")
    assert "raised at train.py:" in " ".join(_report_lines(stderr)[:2])
    data = json.loads((tmp_path / "r.json").read_text())
    assert (data["failed"], data["end_status"], data["exit_code"]) == (True, "interrupted", 130)


@needs_torch
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_killed_job_report_says_it_did_not_finish(tmp_path: Path) -> None:
    proc = _started(tmp_path, "while True:\n    time.sleep(0.01)")
    proc.send_signal(signal.SIGTERM)  # Python's default: the process ends at once, no cleanup
    proc.communicate(timeout=PATIENCE_S)
    assert proc.returncode == -signal.SIGTERM  # the signal passes through as the job's end
    assert not (tmp_path / "r.json").exists()  # nothing could report: the record tells
    text = _saved_report(tmp_path, "text")
    assert text.startswith("The job did not finish: its record has no end")
    assert "No problems found" not in text and "No findings" not in text
    data = json.loads(_saved_report(tmp_path, "json"))
    assert data["failed"] is True and data["end_status"] is None
    assert data["outcome"].startswith("The job did not finish")
    assert _html_first_paragraph(_saved_report(tmp_path, "html")).startswith(
        "The job did not finish"
    )
