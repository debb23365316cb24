"""``make demo``'s first finding promises a speed-up: applied, its fix must deliver it.

The demo job runs under ``stepdoctor run``; its first finding about the job is the DataLoader's
per-sample indexing, fixed by indexing whole batches. The fix is then applied in this process:
epochs of the job as written and epochs with the fix alternate (the machine's other load hits
both alike), and the median ratio of their times must be within 1.3x of the claim either way
(issue 23's bar for a claim that holds).
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import time
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("torch")

import torch

from tests._zygote import stepdoctor_run
from tests.scenarios._verdicts import MACHINE_RULES

DEMO = Path(__file__).parents[2] / "examples" / "train_digits.py"
#: A claim holds within this factor of what the fix measures (issue 23).
WITHIN = 1.3
#: Pairs of rounds: in one the job as written runs first, in the other the fixed one, so
#: whatever favours the first (or second) of two runs cancels out within the pair.
PAIRS = 4
#: Epochs timed together in a run (one epoch of the demo is ~50 ms: too short to time alone).
EPOCHS = 3


def _demo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("train_digits", DEMO)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _epochs_s(demo: ModuleType, loader: object, model: torch.nn.Module) -> float:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    start = time.perf_counter()
    for _ in range(EPOCHS):
        demo.train_epoch(model, loader, optimizer)
    return time.perf_counter() - start


# measures the fix's gain against the claim: beside no other test
@pytest.mark.serial
@pytest.mark.scenario
def test_the_demos_first_fix_applied_gains_what_the_report_claims(tmp_path: Path) -> None:
    out = tmp_path / "demo.json"
    proc = stepdoctor_run(
        ["run", "--no-report", "--json", str(out), "--out", str(tmp_path / "run"), str(DEMO),
         "--epochs", "5"],
        env=dict(os.environ), timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    findings = json.loads(out.read_text())["findings"]
    first = next(f for f in findings if f["rule"] not in MACHINE_RULES)
    assert first["rule"] == "input-bound" and "BatchSampler" in first["fix"]["snippet"]
    claimed = first["speedup"]["factor"]

    demo = _demo()
    torch.manual_seed(0)
    data = demo.make_data()
    plain = demo.make_loader(data, 32)
    fixed = demo.make_loader(data, 32, batched=True)
    model = demo.make_model()
    _epochs_s(demo, plain, model), _epochs_s(demo, fixed, model)  # warm both
    ratios = []
    for _ in range(PAIRS):
        a1, b1 = _epochs_s(demo, plain, model), _epochs_s(demo, fixed, model)
        b2, a2 = _epochs_s(demo, fixed, model), _epochs_s(demo, plain, model)
        ratios.append((a1 + a2) / (b1 + b2))
    measured = statistics.median(ratios)
    assert claimed / WITHIN <= measured <= claimed * WITHIN, (claimed, sorted(ratios))
