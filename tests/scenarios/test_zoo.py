"""The scenario zoo: real training runs on this CPU with one fault planted each.

Every faulty script must put its rule on top of the findings about the job, with warning or
critical severity; healthy scripts must raise no warning or critical finding about the job.
Findings about the machine (other processes taking its CPUs) must match what the run's record
shows (``_verdicts``). Each run is a real subprocess under ``stepdoctor run`` (a fixed number of
steps and at least 3 s of training, plus torch's import).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stepdoctor.record import load_run

from ._verdicts import LOUD, MACHINE_RULES, about_the_job

HERE = Path(__file__).parent

FAULTS = {
    "input_bound.py": "input-bound",
    "slow_callbacks.py": "slow-callbacks",
    "checkpoint_stalls.py": "checkpoint-stalls",
    "gc_pauses.py": "gc-pauses",
    "small_batch.py": "small-batch",
    "step_outliers.py": "step-outliers",
    "memory_growth.py": "memory-growth",
    "competing_processes.py": "competing-processes",
    "oversubscribed_threads.py": "thread-oversubscription",
    "shared_model_threads.py": "shared-model-threads",
    "float64.py": "float64",
    # issue 3: model checks on a real run
    "oversized_network.py": "oversized-network",
    "inference_autograd.py": "autograd-in-inference",
    # issue 22: the classes that were missed
    "helper_processes.py": "helper-processes",
    "leak_outputs.py": "memory-growth",
}
HEALTHY = ("healthy_mlp.py", "healthy_workers.py", "healthy_cnn.py", "healthy_checkpoint.py")
#: Faults planted at a second, smaller dose (``ZOO_MAGNITUDE=mild``) and fixed
#: (``ZOO_FIXED=1``): the mild one still puts its rule on top, the fixed one raises nothing.
DOSED = ("helper_processes.py", "leak_outputs.py")


def run_scenario(script: str, tmp_path: Path, **env: str) -> tuple[dict[str, object], Path]:
    """Run ``script`` under ``stepdoctor run`` (``env`` added to the environment): its JSON
    report and its run folder."""
    out = tmp_path / "report.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "stepdoctor",
            "run",
            "--no-report",
            "--json",
            str(out),
            "--out",
            str(tmp_path / "run"),
            str(HERE / script),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONWARNINGS": "ignore", **env},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    report: dict[str, object] = json.loads(out.read_text())
    return report, tmp_path / "run"


def _describe(report: dict[str, object]) -> str:
    findings = report["findings"]
    assert isinstance(findings, list)
    return "; ".join(f"{f['rule']} {f['severity']} x{f['estimated_speedup']:.2f}" for f in findings)


@pytest.mark.scenario
@pytest.mark.parametrize(("script", "rule_id"), sorted(FAULTS.items()))
def test_planted_fault_comes_out_on_top(script: str, rule_id: str, tmp_path: Path) -> None:
    report, run_dir = run_scenario(script, tmp_path)
    _assert_on_top(report, run_dir, rule_id)


@pytest.mark.scenario
@pytest.mark.parametrize("script", DOSED)
def test_a_milder_dose_still_comes_out_on_top(script: str, tmp_path: Path) -> None:
    report, run_dir = run_scenario(script, tmp_path, ZOO_MAGNITUDE="mild")
    _assert_on_top(report, run_dir, FAULTS[script])


@pytest.mark.scenario
@pytest.mark.parametrize("script", DOSED)
def test_the_fixed_twin_raises_no_warning(script: str, tmp_path: Path) -> None:
    report, run_dir = run_scenario(script, tmp_path, ZOO_FIXED="1")
    loud = [f for f in about_the_job(report, run_dir) if f["severity"] in LOUD]
    assert not loud, _describe(report)


def _assert_on_top(report: dict[str, object], run_dir: Path, rule_id: str) -> None:
    job = about_the_job(report, run_dir)
    findings = report["findings"] if rule_id in MACHINE_RULES else job
    assert isinstance(findings, list) and findings, "no findings"
    top = findings[0]
    assert top["rule"] == rule_id, _describe(report)
    assert top["severity"] in LOUD, _describe(report)
    assert top["evidence"] and top["fix"]["summary"]


@pytest.mark.scenario
@pytest.mark.parametrize("script", HEALTHY)
def test_healthy_run_raises_no_warning(script: str, tmp_path: Path) -> None:
    report, run_dir = run_scenario(script, tmp_path)
    loud = [f for f in about_the_job(report, run_dir) if f["severity"] in LOUD]
    assert not loud, _describe(report)
    summary = report["summary"]
    assert isinstance(summary, dict)
    assert summary["steps"] > 20 and summary["samples_per_sec"] > 0
    if script == "healthy_workers.py":  # its worker is known as one: no helper process
        assert load_run(run_dir).loader_workers
