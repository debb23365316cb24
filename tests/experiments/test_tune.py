"""tune's pieces without subprocesses: the overrides a tuning run applies, the plan of
one-change configurations, and the decision rule."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")

import torch
from torch.utils.data import DataLoader, TensorDataset

from stepdoctor.errors import UsageError
from stepdoctor.experiments.overrides import TUNE_ENV, Overrides, apply_overrides
from stepdoctor.experiments.tune import _decide, _Run, plan
from stepdoctor.model import SpeedupKind, TuneTrial


def test_overrides_round_trip_through_the_environment() -> None:
    o = Overrides(max_steps=40, num_workers=2, threads=1, batch_scale=2.0)
    assert Overrides.from_env({TUNE_ENV: o.to_env()}) == o
    assert Overrides.from_env({}) is None
    with pytest.raises(UsageError, match="not a valid tuning change"):
        Overrides.from_env({TUNE_ENV: '{"max_steps": 1, "colour": "red"}'})


def test_apply_overrides_changes_loaders_and_threads_then_undoes() -> None:
    data = TensorDataset(torch.randn(64, 2))
    threads = torch.get_num_threads()
    remove = apply_overrides(Overrides(max_steps=5, batch_scale=2.0, pin_memory=True, threads=1))
    try:
        loader = DataLoader(data, batch_size=8, shuffle=True)
        assert loader.batch_size == 16 and loader.pin_memory is True
        assert loader.num_workers == 0 and loader.prefetch_factor is None  # still valid
        torch.set_num_threads(8)  # the script's own call is ignored
        assert torch.get_num_threads() == 1
    finally:
        remove()
        torch.set_num_threads(threads)
    assert DataLoader(data, batch_size=8).batch_size == 8
    assert torch.get_num_threads() == threads


def test_plan_tries_each_worker_count_with_and_without_freeing_cores() -> None:
    base = _Run(rate=100.0, unit="samples/s", peak_rss=None, error="", workers=0, threads=2,
                batch_size=64, cores=2)  # fmt: skip
    configs = plan(base, steps=50, only=("workers", "threads", "batch"))
    labels = [f"{c.change}={c.value}" for c in configs]
    assert labels == [
        "num_workers=1",
        "num_workers=1 (+threads=1)",
        "num_workers=2",
        "num_workers=2 (+threads=1)",
        "threads=1",
        "batch_size=/2 (32)",
        "batch_size=x2 (128)",
        "batch_size=x4 (256)",
    ]
    assert all(c.overrides.max_steps == 50 for c in configs)


def _trial(change: str, *rates: float) -> TuneTrial:
    return TuneTrial(change=change, value="1", samples_per_sec=rates)


def test_decision_needs_eight_percent_and_no_overlap() -> None:
    base = _trial("baseline", 100.0, 104.0)
    path = Path("train.py")
    win = _decide(path, 50, repeats=2, unit="samples/s", baseline=base,
                  trials=[_trial("num_workers", 120.0, 125.0)])  # fmt: skip
    assert win.best is not None and win.speedup == pytest.approx(122.5 / 102)
    small = _decide(path, 50, repeats=2, unit="samples/s", baseline=base,
                    trials=[_trial("num_workers", 105.0, 107.0)])  # fmt: skip
    assert small.best is None and "below the 1.08x needed" in small.reason
    noisy = _decide(path, 50, repeats=2, unit="samples/s", baseline=base,
                    trials=[_trial("num_workers", 103.0, 150.0)])  # fmt: skip
    assert noisy.best is None and "overlap" in noisy.reason


def test_tune_results_measure_the_matching_findings_or_downgrade_them() -> None:
    from stepdoctor.model import Severity, TuneResult
    from stepdoctor.report import attach_tune, build_report
    from tests.builders import record, steps

    s = steps(200, phases_ms={"data_wait": 30, "forward": 40, "backward": 30})
    report = build_report(record(s))
    assert report.findings[0].rule == "input-bound"
    base = _trial("baseline", 100.0, 101.0)
    workers = TuneTrial(change="num_workers", value="2", samples_per_sec=(130.0, 131.0))
    won = TuneResult(script="t.py", steps=50, repeats=2, unit="samples/s", baseline=base,
                     trials=(workers,), best=workers, speedup=1.3, reason="")  # fmt: skip
    measured = attach_tune(report, won).findings[0]
    assert measured.speedup.kind is SpeedupKind.MEASURED and measured.speedup.factor == 1.3
    assert measured.speedup.spread == pytest.approx((130 / 100.5, 131 / 100.5))
    assert "num_workers=2" in measured.speedup.basis
    assert measured.fix.summary.startswith("Measured best: num_workers=2, 1.30x")
    lost = TuneResult(script="t.py", steps=50, repeats=2, unit="samples/s", baseline=base,
                      trials=(workers,), best=None, speedup=1.3, reason="overlap")  # fmt: skip
    downgraded = attach_tune(report, lost).findings
    (f,) = [x for x in downgraded if x.rule == "input-bound"]
    assert f.severity is Severity.INFO and "not faster beyond noise" in f.explanation
    assert f.speedup.kind is SpeedupKind.MEASURED and "Keep the job's settings" in f.fix.summary


def test_a_fix_measured_slower_never_reaches_the_report() -> None:
    """More workers measured slower than the job as it is: the finding that suggests them
    keeps no recommendation of them, says so, and ranks below what saves time."""
    from stepdoctor.model import Severity, TuneResult
    from stepdoctor.report import attach_tune, build_report
    from tests.builders import record, steps

    s = steps(200, phases_ms={"data_wait": 30, "forward": 40, "backward": 30})
    report = build_report(record(s))
    (before,) = [f for f in report.findings if f.rule == "input-bound"]
    assert "num_workers=" in (before.fix.snippet or "")  # the model's advice: add workers
    base = _trial("baseline", 100.0, 101.0)
    slower = (
        TuneTrial(change="num_workers", value="1", samples_per_sec=(41.0, 43.0)),
        TuneTrial(change="num_workers", value="2", samples_per_sec=(26.0, 27.0)),
    )
    batch = TuneTrial(change="batch_size", value="x4 (256)", samples_per_sec=(160.0, 164.0))
    result = TuneResult(script="t.py", steps=50, repeats=2, unit="samples/s", baseline=base,
                        trials=(*slower, batch), best=batch, speedup=1.62,
                        reason="x4 won")  # fmt: skip
    findings = attach_tune(report, result).findings
    (after,) = [f for f in findings if f.rule == "input-bound"]
    assert after.severity is Severity.INFO
    assert after.speedup.kind is SpeedupKind.MEASURED and after.speedup.factor < 1
    assert "slower than the job as it is" in after.explanation
    assert "num_workers" not in (after.fix.snippet or "") and "Keep the job's settings" in (
        after.fix.summary
    )
    # The change that won leads the report, though no rule suggested it.
    assert findings[0].rule == "tune" and findings[0].speedup.factor == 1.62
    assert "batch_size=x4 (256)" in findings[0].title
