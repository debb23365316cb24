"""``stepdoctor tune`` on real scenario jobs (each run a real subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent


def _tune(tmp: Path, script: str, *flags: str) -> dict[str, object]:
    out = tmp / "tune.json"
    proc = subprocess.run(
        [sys.executable, "-m", "stepdoctor", "tune", *flags, "--json", str(out),
         str(HERE / script)],
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "stepdoctor tune" in proc.stdout
    result: dict[str, object] = json.loads(out.read_text())
    return result


@pytest.mark.scenario
def test_input_bound_job_is_measured_faster_with_workers(tmp_path: Path) -> None:
    result = _tune(tmp_path, "input_bound.py", "--only", "workers", "--steps", "60")
    best = result["best"]
    assert isinstance(best, dict) and best["change"] == "num_workers", result["reason"]
    assert result["speedup"] >= 1.08  # type: ignore[operator]


@pytest.mark.scenario
def test_compute_bound_job_is_not_told_to_add_workers(tmp_path: Path) -> None:
    result = _tune(tmp_path, "healthy_mlp.py", "--only", "workers", "--steps", "40")
    assert result["best"] is None, result["reason"]


@pytest.mark.scenario
def test_batch_of_one_job_gets_the_batch_size_curve(tmp_path: Path) -> None:
    result = _tune(tmp_path, "small_batch.py", "--only", "batch", "--steps", "40", "--repeats", "1")
    trials = {t["value"]: t for t in result["trials"]}  # type: ignore[attr-defined]
    base = result["baseline"]["samples_per_sec"][0]  # type: ignore[index]
    x2 = trials["x2 (2)"]["samples_per_sec"][0]
    x4 = trials["x4 (4)"]["samples_per_sec"][0]
    assert base < x2 < x4
    assert result["best"]["value"] == "x4 (4)"  # type: ignore[index]
