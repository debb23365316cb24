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


def test_a_cheap_sample_in_the_main_process_gets_batched_indexing_not_workers() -> None:
    # make demo's job: 32 samples of 64 floats fetched in 0.13 ms (4 us a sample), 20% of
    # the step: the DataLoader's per-sample work, which workers make slower.
    s = steps(200, phases_ms={"data_wait": 0.13, "forward": 0.2, "backward": 0.3})
    loader = LoaderInfo(loader_id=1, num_workers=0, batch_size=32, dataset_type="TensorDataset")
    (f,) = input_bound(RuleContext(record(s, loaders=[loader], facts=env(cpu__affinity=2))))
    assert "BatchSampler" in f.fix.summary and "num_workers" not in f.fix.summary
    assert f.fix.snippet is not None and "batch_size=32" in f.fix.snippet
    # A data set of its own spending 1 ms on each sample keeps the worker advice.
    own = LoaderInfo(loader_id=1, num_workers=0, batch_size=32, dataset_type="DecodedDataset")
    slow = steps(200, phases_ms={"data_wait": 32, "forward": 20, "backward": 30})
    (g,) = input_bound(RuleContext(record(slow, loaders=[own], facts=env(cpu__affinity=2))))
    assert "num_workers=1" in g.fix.summary and "BatchSampler" not in g.fix.summary


def test_the_loaders_own_work_on_in_memory_data_is_info_below_ten_percent() -> None:
    # A compute-bound MLP fetching rows of a TensorDataset one by one: 6% of its step, 30 us a
    # sample on a loaded machine (the share holds, the per-sample time does not).
    s = steps(200, phases_ms={"data_wait": 1.9, "forward": 10, "backward": 18})
    loader = LoaderInfo(loader_id=1, num_workers=0, batch_size=64, dataset_type="TensorDataset")
    (f,) = input_bound(RuleContext(record(s, loaders=[loader], facts=env(cpu__affinity=2))))
    assert f.severity is Severity.INFO and "BatchSampler" in f.fix.summary
    # The same share of real per-sample work in a data set of its own stays a warning.
    own = LoaderInfo(loader_id=1, num_workers=0, batch_size=64, dataset_type="DecodedDataset")
    (g,) = input_bound(RuleContext(record(s, loaders=[own], facts=env(cpu__affinity=2))))
    assert g.severity is Severity.WARNING and "num_workers" in g.fix.summary
