"""The step model on real loops: each loop shape's step count is the loop's own count of
parameter updates (or of inference batches), exactly, and every step's phases add up to its
wall time. Each script prints its counts (``steps: N``, ``evaluations: M``)."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import pytest

from stepdoctor.record import load_run
from tests._zygote import stepdoctor_run

from ._catalog import CONTROLS
from ._verdicts import LOUD, about_the_job

HERE = Path(__file__).parent

#: script -> (kind, what the report says the steps were counted by, micro-batches per step,
#: closure passes per step (None: the count the script printed, ``closure_passes: N``))
LOOPS = {
    "loop_manual.py": ("training", "updated by hand", 1, 0),
    "loop_lbfgs.py": ("training", "closure optimizer", 0, None),
    "loop_accumulation.py": ("training", "4 micro-batches each", 4, 0),
    "loop_lm_eval.py": ("training", "updated by hand", 1, 0),
    "loop_eval_epochs.py": ("training", "optimizer step", 1, 0),
    "loop_inference.py": ("inference", "inference", 0, 0),
}


def _run(script: str, tmp_path: Path) -> tuple[dict[str, int], dict[str, object], Path]:
    """Run ``script`` under ``stepdoctor run``: the counts it printed, its JSON report, its
    run folder. Only a healthy control (``CONTROLS``: its report is judged) trains for the
    zoo's floor of seconds; the counts need no more than the loop's own steps."""
    out, run_dir = tmp_path / "report.json", tmp_path / "run"
    command = ["run", "--no-report", "--json", str(out)]
    floor = {} if script in CONTROLS else {"ZOO_MIN_SECONDS": "0"}
    proc = stepdoctor_run(
        [*command, "--out", str(run_dir), str(HERE / script)],
        timeout=120,
        env={**os.environ, "PYTHONWARNINGS": "ignore", **floor},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    counts = {}
    for line in proc.stdout.splitlines():
        name, _, value = line.partition(": ")
        if value.isdigit():
            counts[name] = int(value)
    report: dict[str, object] = json.loads(out.read_text())
    return counts, report, run_dir


@pytest.mark.scenario
@pytest.mark.parametrize("script", sorted(LOOPS))
def test_steps_are_the_loops_own_and_add_up(script: str, tmp_path: Path) -> None:
    kind, basis, micro, closure = LOOPS[script]
    counts, report, run_dir = _run(script, tmp_path)
    summary = report["summary"]
    assert isinstance(summary, dict)
    assert summary["steps"] == counts["steps"]
    assert summary["kind"] == kind
    assert basis in summary["step_basis"]
    assert summary["micro_batches_per_step"] == micro
    if closure is None:
        closure = counts["closure_passes"]
        assert closure >= 2
    assert summary["closure_passes_per_step"] == closure
    assert summary["evaluation_calls"] == counts.get("evaluations", 0)
    assert (summary["evaluation_share"] > 0) == ("evaluations" in counts)

    if script in CONTROLS:  # a healthy job of its shape: no warning
        loud = [f for f in about_the_job(report, run_dir) if f["severity"] in LOUD]
        assert not loud, [(f["rule"], f["title"]) for f in loud]

    steps = load_run(run_dir).steps
    assert len(steps) == counts["steps"]
    for step, after in itertools.pairwise(steps):
        assert step.end_ns == after.start_ns  # no time between steps is lost
    for step in steps:
        assert step.closure_passes == closure
        assert sum(step.phase_ns.values()) == step.wall_ns
        assert step.duration_ns == step.wall_ns - step.phase_ns.get("evaluation", 0)
