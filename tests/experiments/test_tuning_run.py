"""A run of ``stepdoctor tune`` (``stepdoctor run`` with ``STEPDOCTOR_TUNE`` set) ends
without the interpreter's teardown, its exit handlers run, its process pool shut down and
its DataLoader workers gone; a plain ``stepdoctor run`` ends as Python does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stepdoctor.experiments.overrides import TUNE_ENV, Overrides

JOB = Path(__file__).with_name("tuning_job.py")


def _run(tmp_path: Path, tuning: bool) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "TORN": str(tmp_path / "torn"),
        "MARK": str(tmp_path / "mark"),
        "WORKERS": str(tmp_path / "workers"),
        "PYTHONWARNINGS": "ignore",
    }
    env.pop(TUNE_ENV, None)
    if tuning:
        env[TUNE_ENV] = Overrides(max_steps=12).to_env()
    return subprocess.run(
        [sys.executable, "-m", "stepdoctor", "run", "--no-report",
         "--json", str(tmp_path / "report.json"), "--out", str(tmp_path / "run"), str(JOB)],
        capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
    )  # fmt: skip


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("tuning", [True, False], ids=["tuning run", "plain run"])
def test_a_tuning_run_ends_without_teardown_its_handlers_run_and_workers_gone(
    tmp_path: Path, tuning: bool
) -> None:
    pytest.importorskip("torch")
    proc = _run(tmp_path, tuning)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["end_status"] == ("stopped" if tuning else "ok")
    assert report["summary"]["steps"] == (12 if tuning else 800)
    assert (tmp_path / "mark").read_text() == "atexit ran"
    workers = [int(pid) for pid in (tmp_path / "workers").read_text().split()]
    assert workers and not any(_alive(pid) for pid in workers)
    assert (tmp_path / "torn").exists() is not tuning
