"""``stepdoctor compare``: the test statistic against scipy's, verdicts on built runs, and two
real runs of which one sleeps in its callbacks."""

from __future__ import annotations

import dataclasses
import json
import os
import random
from pathlib import Path

import pytest

from stepdoctor.cli import main
from stepdoctor.compare import compare_runs, mann_whitney_u
from stepdoctor.model import StepTiming
from stepdoctor.record import load_run
from stepdoctor.report import build_report
from tests._zygote import stepdoctor_run
from tests.builders import record, steps
from tests.marks import needs_torch


@pytest.mark.parametrize("seed", range(5))
def test_mann_whitney_matches_scipy(seed: int) -> None:
    rng = random.Random(seed)
    x = [round(rng.gauss(10, 2), 1) for _ in range(rng.randint(5, 300))]  # rounded: ties
    y = [round(rng.gauss(10.3, 2), 1) for _ in range(rng.randint(5, 300))]
    from scipy.stats import mannwhitneyu  # here: scipy.stats takes ~1.5 s to import

    u, p = mann_whitney_u(x, y)
    expected = mannwhitneyu(x, y, alternative="two-sided", method="asymptotic")
    assert u == pytest.approx(expected.statistic)
    assert p == pytest.approx(expected.pvalue, rel=1e-9)


def _noisy(n: int, forward_ms: float, seed: int, batch: int | None = 32) -> tuple[StepTiming, ...]:
    rng = random.Random(seed)
    out, t = [], 0
    for i, base in enumerate(steps(n, phases_ms={"forward": forward_ms, "data_wait": 2},
                                   batch=batch)):  # fmt: skip
        fwd = int(base.phase_ns["forward"] * rng.uniform(0.95, 1.05))
        phases = {"forward": fwd, "data_wait": base.phase_ns["data_wait"]}
        dur = sum(phases.values())
        out.append(dataclasses.replace(base, index=i, start_ns=t, end_ns=t + dur, phase_ns=phases))
        t += dur
    return tuple(out)


def test_verdicts_on_built_runs() -> None:
    slow = record(_noisy(200, 20, 1))
    fast = record(_noisy(200, 10, 2))
    same = record(_noisy(200, 20, 3))
    better = compare_runs(slow, fast)
    assert better.verdict == "faster" and not better.regression
    assert better.unit == "ms per sample"
    assert better.phases[0].phase == "forward" and better.phases[0].change_ms < 0
    worse = compare_runs(fast, slow, threshold=0.05)
    assert worse.verdict == "slower" and worse.regression
    assert not compare_runs(fast, slow, threshold=2.0).regression  # +~70%, under 200%
    noise = compare_runs(slow, same)
    assert noise.verdict == "no significant change" and noise.p_value > 0.01
    unknown = compare_runs(record(_noisy(50, 20, 1, batch=None)), slow)
    assert unknown.unit == "ms per step" and any("batch sizes" in w for w in unknown.warnings)
    short = compare_runs(record(_noisy(5, 20, 1)), slow)
    assert short.verdict == "no significant change" and any("too few" in w for w in short.warnings)


SCRIPT = """
import time, torch
torch.set_num_threads(1)  # a competing process then slows it evenly (tests/scenarios/_zoo.py)
model = torch.nn.Linear(32, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = torch.utils.data.DataLoader(
    torch.utils.data.TensorDataset(torch.randn(4096, 32), torch.randn(4096, 4)), batch_size=32)
for x, y in loader:
    opt.zero_grad(); torch.nn.functional.mse_loss(model(x), y).backward(); opt.step()
    time.sleep({sleep})  # "callbacks" between steps
"""


def _real_run(tmp_path: Path, name: str, sleep: float) -> Path:
    script = tmp_path / f"{name}.py"
    script.write_text(SCRIPT.format(sleep=sleep))
    proc = stepdoctor_run(
        ["run", "--out", str(tmp_path / name), str(script)],
        timeout=180, cwd=tmp_path, env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return tmp_path / name


@needs_torch
def test_real_runs_faster_and_regression_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 20 ms asleep between steps of a tiny model (~0.2 ms, a few ms on a loaded machine): the
    # planted difference dominates whatever else the machine is doing.
    slow = _real_run(tmp_path, "slow", 0.02)
    fast = _real_run(tmp_path, "fast", 0.0)
    assert main(["compare", str(slow), str(fast), "--json", str(tmp_path / "c.json")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("AFTER is faster")
    data = json.loads((tmp_path / "c.json").read_text())
    assert data["verdict"] == "faster" and data["speedup"] > 1.5
    assert data["phases"][0]["phase"] == "other"  # the sleep is between the phases
    # The findings that changed are exactly the differences between the two diagnoses.
    before = {f.rule: f.severity.value for f in build_report(load_run(slow)).findings}
    after = {f.rule: f.severity.value for f in build_report(load_run(fast)).findings}
    expected = {r: (before.get(r), after.get(r)) for r in {*before, *after}
                if before.get(r) != after.get(r)}  # fmt: skip
    assert {f["rule"]: (f["before"], f["after"]) for f in data["findings"]} == expected
    assert before.get("slow-callbacks") == "critical"  # most of each step asleep
    # The other way round it is a regression: exit code 1 for CI.
    assert main(["compare", str(fast), str(slow)]) == 1
    assert "regression" in capsys.readouterr().out
