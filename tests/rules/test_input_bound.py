from __future__ import annotations

from stepdoctor.model import LoaderInfo, Severity
from stepdoctor.rules import RuleContext
from stepdoctor.rules.input_bound import input_bound
from tests.builders import env, record, samples, steps


def test_fires_critical_with_loader_settings_and_worker_fix() -> None:
    s = steps(50, phases_ms={"data_wait": 30, "forward": 40, "backward": 30})
    loader = LoaderInfo(loader_id=1, num_workers=0, batch_size=32)
    (f,) = input_bound(RuleContext(record(s, loaders=[loader], facts=env(cpu__affinity=8))))
    assert f.severity is Severity.CRITICAL
    assert abs(f.speedup.factor - 1 / 0.7) < 1e-6
    metrics = {e.metric: e.value for e in f.evidence}
    assert metrics["DataLoader num_workers"] == 0
    assert metrics["time to prepare one sample"] == round(30 / 32, 3)
    assert "num_workers=7" in f.fix.summary


def test_warning_band_and_caching_advice_when_workers_use_every_core() -> None:
    s = steps(50, phases_ms={"data_wait": 10, "forward": 90})
    loader = LoaderInfo(loader_id=1, num_workers=4, batch_size=32, persistent_workers=True)
    ctx = RuleContext(record(s, cores=4, loaders=[loader], system=samples(s, children_cpu=380.0)))
    (f,) = input_bound(ctx)
    assert f.severity is Severity.WARNING
    assert "Pre-compute" in f.fix.summary
    assert "already uses" in f.fix.summary


def test_silent_below_five_percent() -> None:
    s = steps(50, phases_ms={"data_wait": 4, "forward": 96})
    assert input_bound(RuleContext(record(s))) == []
