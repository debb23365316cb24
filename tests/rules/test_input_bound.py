from __future__ import annotations

import dataclasses

import pytest

from stepdoctor.model import WORKER_PHASE, LoaderInfo, Severity, StepTiming
from stepdoctor.rules import RuleContext
from stepdoctor.rules.input_bound import input_bound
from tests.builders import env, record, samples, stacked, steps


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
    # Four workers 95% busy on 4 cores: preparing samples is the cost, and no core is spare.
    assert "Do that work once" in f.fix.summary
    assert "Workers would not help" in f.fix.summary


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


def _main_thread(s: tuple[StepTiming, ...], wait_share: float, busy: float) -> tuple:
    """System samples whose main-thread CPU clock runs at 100% outside the data wait and at
    ``busy`` inside it."""
    start = s[0].start_ns
    rate = (1 - wait_share) + wait_share * busy
    return tuple(
        dataclasses.replace(x, main_thread_cpu_s=(x.t_ns - start) / 1e9 * rate + 5.0)
        for x in samples(s)
    )


def _decoder(workers: int = 0) -> LoaderInfo:
    return LoaderInfo(
        loader_id=1,
        num_workers=workers,
        batch_size=32,
        dataset_type="Decoded",
        getitem_at="/job/data.py:41",
    )


def test_cpu_work_per_sample_is_cured_by_preparing_once_and_names_the_code() -> None:
    s = steps(100, phases_ms={"data_wait": 40, "forward": 30, "backward": 30})
    rec = record(s, cores=2, loaders=[_decoder()], system=_main_thread(s, 0.4, busy=0.95),
                 facts=env(cpu__affinity=2, torch__num_threads=2))  # fmt: skip
    (f,) = input_bound(RuleContext(rec))
    ev = {e.metric: e.value for e in f.evidence}
    assert ev["loader on a CPU while the loop waited"] == pytest.approx(0.95, abs=0.01)
    assert "Decoded.__getitem__ (/job/data.py:41)" in f.fix.summary
    assert "once" in f.fix.summary and "Workers would not help" in f.fix.summary
    assert "num_workers=" not in (f.fix.snippet or "")
    # With a core no thread of the job uses, workers are offered on it.
    spare = record(s, cores=4, loaders=[_decoder()], system=_main_thread(s, 0.4, busy=0.95),
                   facts=env(cpu__affinity=4, torch__num_threads=2))  # fmt: skip
    (g,) = input_bound(RuleContext(spare))
    assert "num_workers=2" in g.fix.summary


def test_an_idle_loader_is_waiting_on_storage_and_gets_prefetching_workers() -> None:
    s = steps(100, phases_ms={"data_wait": 40, "forward": 30, "backward": 30})
    rec = record(s, cores=2, loaders=[_decoder()], system=_main_thread(s, 0.4, busy=0.02),
                 facts=env(cpu__affinity=2, torch__num_threads=2))  # fmt: skip
    (f,) = input_bound(RuleContext(rec))
    assert "storage or the network" in f.fix.summary
    assert f.fix.snippet is not None and "prefetch_factor=4" in f.fix.snippet
    # Workers that idle while the loop waits: the same cause.
    w = record(s, cores=2, loaders=[_decoder(workers=2)],
               system=samples(s, children_cpu=20.0), facts=env(cpu__affinity=2))  # fmt: skip
    (g,) = input_bound(RuleContext(w))
    assert "storage or the network" in g.fix.summary and "num_workers=4" in g.fix.summary
    # Busy workers: the samples' preparation.
    b = record(s, cores=2, loaders=[_decoder(workers=2)],
               system=samples(s, children_cpu=190.0), facts=env(cpu__affinity=2))  # fmt: skip
    (h,) = input_bound(RuleContext(b))
    assert "Preparing each sample is the cost" in h.fix.summary


IDLE = ("_bootstrap", "_worker_loop", "Queue.get", "_ConnectionBase.poll")
FETCHING = ("_bootstrap", "_worker_loop", "_MapDatasetFetcher.fetch", "Decoded.__getitem__")


def test_workers_that_wait_for_indices_make_the_wait_a_hand_off() -> None:
    """Idle workers keep up: the loop's wait is each batch's hand-off, not loading; no more
    workers, info below 10%; num_workers=0 where a batch costs less than waiting for it."""
    s = steps(100, phases_ms={"data_wait": 8, "forward": 46, "backward": 46})
    loaded = record(s, cores=2, loaders=[_decoder(workers=1)],
                    system=samples(s, children_cpu=5.0, other_cpu=110.0),
                    facts=env(cpu__affinity=2))  # fmt: skip
    idle = stacked(loaded, {WORKER_PHASE: [(IDLE, 180), (FETCHING, 20)]})
    (f,) = input_bound(RuleContext(idle))
    assert f.severity == Severity.INFO  # 8%: under the hand-off's 10% warning
    assert "sat idle in 90%" in f.fix.summary and "hand-off" in f.fix.summary
    assert "num_workers=4" not in f.fix.summary and "more workers" in f.fix.summary
    assert "Other processes used 55% of the CPUs" in f.fix.summary
    assert "num_workers=0" in f.fix.summary  # a batch costs 5 ms of CPU, less than 8 ms waited
    assert any(e.metric == "workers idle, waiting for their next indices" for e in f.evidence)
    # Busy workers are what the loop waits for: the usual causes and grading.
    busy = stacked(loaded, {WORKER_PHASE: [(IDLE, 20), (FETCHING, 180)]})
    (g,) = input_bound(RuleContext(busy))
    assert g.severity == Severity.WARNING and "hand-off" not in g.fix.summary
    # Too few worker samples to judge: not a hand-off.
    few = stacked(loaded, {WORKER_PHASE: [(IDLE, 50)]})
    (h,) = input_bound(RuleContext(few))
    assert "hand-off" not in h.fix.summary


def test_a_cause_not_measured_keeps_the_general_advice() -> None:
    s = steps(100, phases_ms={"data_wait": 40, "forward": 30, "backward": 30})
    rec = record(s, cores=2, loaders=[_decoder()], system=_main_thread(s, 0.4, busy=0.45),
                 facts=env(cpu__affinity=2))  # fmt: skip
    (f,) = input_bound(RuleContext(rec))
    assert "Load batches in background processes" in f.fix.summary


def test_overlapping_the_wait_cannot_claim_cores_the_job_already_uses() -> None:
    # Cause unknown (no reading of the loop's thread): the fix overlaps the wait with workers.
    s = steps(100, phases_ms={"data_wait": 40, "forward": 30, "backward": 30})
    busy = record(s, cores=2, loaders=[_decoder()], system=samples(s, job_cpu=190.0),
                  facts=env(cpu__affinity=2))  # fmt: skip
    (f,) = input_bound(RuleContext(busy))
    # 1.9 of 2 cores busy: the step cannot drop below 95% of itself, whatever overlaps.
    assert f.speedup.factor == pytest.approx(1 / 0.95)
    assert "capped by the machine" in f.speedup.basis
    idle = record(s, cores=4, loaders=[_decoder()], system=samples(s, job_cpu=100.0),
                  facts=env(cpu__affinity=4))  # fmt: skip
    (g,) = input_bound(RuleContext(idle))
    assert g.speedup.factor == pytest.approx(1 / 0.6)  # three cores to spare


def test_a_hand_off_late_behind_the_jobs_own_threads_is_their_symptom() -> None:
    """16 intra-op threads on 2 cores: the idle workers hand their batches over late, once
    they get a core. Told as info, pointing at thread-oversubscription, whatever the share.
    Idle workers beside a pool sized to the cores take no core from it (a job with 4 of them
    and 2 threads on 2 cores ran slower with 1 thread and 1 worker: docs/calibration.md)."""
    s = steps(100, phases_ms={"data_wait": 17, "forward": 42, "backward": 41})
    crowded = record(s, cores=2, loaders=[_decoder(workers=4)], system=samples(s),
                     facts=env(cpu__affinity=2, torch__num_threads=16))  # fmt: skip
    (f,) = input_bound(RuleContext(stacked(crowded, {WORKER_PHASE: [(IDLE, 190), (FETCHING, 10)]})))
    assert f.severity == Severity.INFO
    assert "runs 20 compute threads on 2 cores (see the finding on threads)" in f.fix.summary
    for workers, threads in ((1, 1), (4, 2)):  # the hand-off's own grading
        roomy = record(s, cores=2, loaders=[_decoder(workers=workers)], system=samples(s),
                       facts=env(cpu__affinity=2, torch__num_threads=threads))  # fmt: skip
        idle = stacked(roomy, {WORKER_PHASE: [(IDLE, 190), (FETCHING, 10)]})
        (g,) = input_bound(RuleContext(idle))
        assert g.severity == Severity.WARNING and "finding on threads" not in g.fix.summary


def _loaded_main_thread(s: tuple[StepTiming, ...], *, busy: float, compute: float) -> tuple:
    """System samples whose main-thread CPU clock runs at ``busy`` in each step's data wait
    (at its start) and at ``compute`` in the rest of it (a core shared with another process)."""

    def cpu_at(t: int) -> float:
        used = 0.0
        for st in s:
            if st.start_ns >= t:
                break
            wait_end = st.start_ns + st.phase_ns.get("data_wait", 0)
            used += (min(t, wait_end) - st.start_ns) / 1e9 * busy
            if t > wait_end:
                used += (min(t, st.end_ns) - wait_end) / 1e9 * compute
        return used + 5.0

    return tuple(dataclasses.replace(x, main_thread_cpu_s=cpu_at(x.t_ns)) for x in samples(s))


def test_a_loader_on_a_cpu_beside_a_busy_machine_is_still_the_samples_preparation() -> None:
    # examples/frameworks/hf_job.py's slow collator beside a fresh-clone check: the loop's
    # thread got half a core, in its waits as in its compute; a core assumed there left its
    # collator's CPU unseen
    s = steps(60, phases_ms={"data_wait": 60, "forward": 120, "backward": 120})
    system = _loaded_main_thread(s, busy=0.45, compute=0.5)
    rec = record(s, cores=2, loaders=[_decoder()], system=system,
                 facts=env(cpu__affinity=2, torch__num_threads=2))  # fmt: skip
    (f,) = input_bound(RuleContext(rec))
    ev = {e.metric: e.value for e in f.evidence}
    assert ev["loader on a CPU while the loop waited"] == pytest.approx(0.9, abs=0.05)
    assert "storage or the network" not in f.fix.summary
    # idle in its waits on the same busy machine: storage after all
    idle = record(s, cores=2, loaders=[_decoder()],
                  system=_loaded_main_thread(s, busy=0.02, compute=0.5),
                  facts=env(cpu__affinity=2, torch__num_threads=2))  # fmt: skip
    (g,) = input_bound(RuleContext(idle))
    assert "storage or the network" in g.fix.summary


def test_a_loader_that_already_returns_batches_is_not_told_to_batch() -> None:
    # examples/frameworks/lightning_job.py: a BatchSampler with batch_size=None, 0.6 ms a batch
    s = steps(200, phases_ms={"data_wait": 0.6, "forward": 5, "backward": 5})
    batched = LoaderInfo(
        loader_id=1,
        num_workers=0,
        batch_size=None,
        dataset_type="TensorDataset",
        auto_collation=False,
    )
    (f,) = input_bound(RuleContext(record(s, loaders=[batched], facts=env(cpu__affinity=2))))
    assert f.severity is Severity.INFO
    assert "already returns whole batches" in f.fix.summary and "BatchSampler" not in f.fix.summary
