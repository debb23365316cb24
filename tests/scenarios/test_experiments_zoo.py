"""``stepdoctor run --experiments`` on real scenario jobs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("torch")

import torch

from tests._zygote import stepdoctor_run

from ._verdicts import LOUD, about_the_job

HERE = Path(__file__).parent


def _folder(tmp: Path, script: str, experiments: bool = True) -> Path:
    return tmp / f"run-{script}-{experiments}"


def _run(tmp: Path, script: str, *args: str, experiments: bool = True) -> dict[str, object]:
    out = tmp / f"{script}.{experiments}.json"
    flags = ["--experiments", "--experiment-budget", "6"] if experiments else []
    proc = stepdoctor_run(
        [
            "run", "--no-report", *flags,
            "--json", str(out), "--out", str(_folder(tmp, script, experiments)),
            str(HERE / script), *args,
        ],
        timeout=180,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    report: dict[str, object] = json.loads(out.read_text())
    return report


@pytest.mark.scenario
def test_final_weights_are_identical_with_and_without_experiments(tmp_path: Path) -> None:
    plain, measured = tmp_path / "plain.pt", tmp_path / "measured.pt"
    _run(tmp_path, "seeded_training.py", str(plain), experiments=False)
    report = _run(tmp_path, "seeded_training.py", str(measured))
    assert report["experiments"], "the experiment did not run"
    a, b = torch.load(plain), torch.load(measured)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.scenario
def test_input_bound_job_gets_a_measured_speedup(tmp_path: Path) -> None:
    report = _run(tmp_path, "input_bound.py")
    (verdict,) = report["experiments"]  # type: ignore[misc]
    assert verdict["bound"] == "input"
    top = about_the_job(report, _folder(tmp_path, "input_bound.py"))[0]
    assert top["rule"] == "input-bound" and top["measured_speedup"] > 1.0  # type: ignore[operator]


@pytest.mark.scenario
def test_compute_bound_job_is_not_told_to_add_workers(tmp_path: Path) -> None:
    report = _run(tmp_path, "healthy_mlp.py")
    (verdict,) = report["experiments"]  # type: ignore[misc]
    assert verdict["bound"] == "compute"
    for finding in about_the_job(report, _folder(tmp_path, "healthy_mlp.py")):
        assert finding["severity"] not in LOUD, finding["rule"]
        assert finding["rule"] != "input-bound" or finding["severity"] == "info"


@pytest.mark.scenario
def test_run_with_trace_folds_the_trace_into_the_report(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    proc = stepdoctor_run(
        ["run", "--no-report", "--trace",
         "--json", str(out), "--out", str(tmp_path / "run"), str(HERE / "healthy_mlp.py")],
        timeout=180,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "profiler trace:" in proc.stderr
    traces = list((tmp_path / "run" / "trace").glob("*.pt.trace.json.gz"))
    assert len(traces) == 1
    report = json.loads(out.read_text())
    assert any("no GPU events" in w for w in report["warnings"])  # honest on a CPU machine
    loud = [(f["rule"], f["severity"], f["title"]) for f in about_the_job(report, tmp_path / "run")]
    assert all(severity == "info" for _, severity, _ in loud), loud
