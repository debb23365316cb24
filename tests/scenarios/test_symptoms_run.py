"""A symptom and its cause on a real run: outlier steps in which the collector ran are the
gc-pauses finding's evidence, never a finding ranked above it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("torch")

from tests._machine import judged
from tests._zygote import stepdoctor_run

from ._verdicts import about_the_job, warmup_of

pytestmark = pytest.mark.scenario

#: A cache of a million small objects, and a full collection every 25 steps (a "memory
#: hygiene" call in the loop): every 25th step is an outlier, ~15 of them after warm-up, and
#: the collector takes most of the time. Before the fold, step-outliers (a warning, "up to
#: 4.25x") was ranked above gc-pauses (critical, 3.04x) on such a run.
JOB = """
import gc

import torch

cache = [{"id": i, "tags": [i]} for i in range(1_000_000)]
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(32, 64), torch.randint(0, 4, (32,))
for step in range(400):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 25 == 24:
        gc.collect()
print(len(cache))
"""

Run = tuple[dict[str, object], Path]


def _run(folder: Path) -> Run:
    folder.mkdir(parents=True, exist_ok=True)
    script, report, out = folder / "job.py", folder / "report.json", folder / "run"
    script.write_text(JOB)
    proc = stepdoctor_run(
        ["run", "--no-report", "--json", str(report), "--out", str(out), str(script)],
        timeout=300, cwd=folder, env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(report.read_text()), out


def _folded(run: Run) -> None:
    report, out = run
    findings = about_the_job(report, out)
    rules = [f["rule"] for f in findings]
    assert "gc-pauses" in rules and "step-outliers" not in rules, rules
    (gc,) = (f for f in findings if f["rule"] == "gc-pauses")
    evidence = {e["metric"]: e["value"] for e in gc["evidence"]}  # type: ignore[union-attr]
    assert evidence["symptom: outlier steps"] > 10, evidence
    assert evidence["symptom: when"] == "every 25 steps"
    assert "Its symptom:" in str(gc["explanation"])


def test_outliers_a_collection_ran_in_are_the_gc_findings_evidence(tmp_path: Path) -> None:
    judged(_run, lambda run: (run[1], warmup_of(run[0])), _folded, tmp_path)
