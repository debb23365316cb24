"""competing-processes, thread-oversubscription, small-batch: rules on machine readings."""

from __future__ import annotations

from dataclasses import replace

import pytest

from stepdoctor.model import (
    WORKER_PHASE,
    GpuProcess,
    GpuSample,
    LayerInfo,
    LoaderInfo,
    ModelInfo,
    ProcessUsage,
    Severity,
    SpeedupKind,
    StepTiming,
    SystemSample,
)
from stepdoctor.rules import RuleContext
from stepdoctor.rules.competing_processes import UNNAMED, competing_processes
from stepdoctor.rules.h2d_copies import h2d_copies
from stepdoctor.rules.small_batch import small_batch
from stepdoctor.rules.tensor_core_precision import tensor_core_precision
from stepdoctor.rules.thread_oversubscription import thread_oversubscription
from tests.builders import MS, env, record, samples, stacked, steps


def test_competing_processes_names_the_top_ones() -> None:
    s = steps(50, phases_ms={"forward": 100})
    hog = (ProcessUsage(pid=42, name="stress", cpu_pct=190.0, command="stress --cpu 2"),)
    system = tuple(replace(x, top_others=hog) for x in samples(s, job_cpu=200.0, other_cpu=200.0))
    (f,) = competing_processes(RuleContext(record(s, system=system)))
    assert f.severity is Severity.CRITICAL  # 200 of 400 %: half the machine
    top = {e.metric: e.value for e in f.evidence}["top other processes"]
    assert top == "stress (pid 42, 190% of a core): stress --cpu 2"
    assert top in f.explanation
    assert f.speedup.factor == 2.0  # min(400, 200 + 200) / 200
    # the command names them by pid, on any machine (no core numbers it may not have)
    assert f.fix.snippet is not None and f.fix.snippet.startswith("renice -n 19 -p 42 ")
    # A job running one thread gains one core at most: min(400, 100, 60 + 300) / 60.
    one = tuple(replace(x, top_others=hog) for x in samples(s, job_cpu=60.0, other_cpu=300.0))
    rec = record(s, system=one, facts=env(torch__num_threads=1))
    (g,) = competing_processes(RuleContext(rec))
    assert g.speedup.factor == pytest.approx(100 / 60)


def test_competing_processes_beside_a_job_that_left_cores_idle_take_nothing_from_it() -> None:
    """Others busy on 2 of 4 cores while the job used 0.5 and a core and a half stayed idle
    (a job asleep, or waiting on its GPU or disk): it was not short of CPU, so no gain is
    claimed and the finding is info. Pinned to 2 cores, the idle ones may not be its own:
    the model stands."""
    s = steps(50, phases_ms={"forward": 100})
    system = samples(s, job_cpu=50.0, other_cpu=200.0)
    (f,) = competing_processes(RuleContext(record(s, system=system)))
    assert f.severity is Severity.INFO and f.speedup.kind is SpeedupKind.NONE
    assert "1.5 CPUs idle" in f.explanation and "not short of CPU" in f.speedup.basis
    pinned = record(s, system=system, facts=env(cpu__affinity=2))
    (g,) = competing_processes(RuleContext(pinned))
    assert g.severity is Severity.CRITICAL and g.speedup.factor == 5.0  # min(400, 250) / 50


def _waited(system: tuple[SystemSample, ...], share: float) -> tuple[SystemSample, ...]:
    """``system`` with the loop thread's run delay growing ``share`` of each second."""
    t0 = system[0].t_ns
    return tuple(replace(x, main_run_delay_s=share * (x.t_ns - t0) / 1e9) for x in system)


def test_a_one_thread_jobs_gain_is_bounded_by_its_loop_threads_wait_for_a_core() -> None:
    """One compute thread, others busy on 1.7 of 2 cores: the model of the CPU it could use
    says 10x (its thread is mostly asleep: 0.1 cores), but its thread waited for a core 1% of
    the time: info, 1.01x. Waiting 50% of the time bounds it at 2x. With two threads the loop
    thread's wait tells less: the model stands."""
    s = steps(50, phases_ms={"forward": 100})
    busy = samples(s, job_cpu=10.0, other_cpu=170.0)
    one = env(torch__num_threads=1)
    (asleep,) = competing_processes(RuleContext(record(s, cores=2, system=_waited(busy, 0.01),
                                                       facts=one)))  # fmt: skip
    assert asleep.severity is Severity.INFO and asleep.speedup.factor == pytest.approx(1 / 0.99)
    assert "waited for a core only 1% of the time" in asleep.explanation
    starved = samples(s, job_cpu=40.0, other_cpu=160.0)  # the model: 100 / 40
    (f,) = competing_processes(RuleContext(record(s, cores=2, system=_waited(starved, 0.5),
                                                  facts=one)))  # fmt: skip
    assert f.severity is Severity.CRITICAL and f.speedup.factor == pytest.approx(2.0)
    assert "waited for a core 50% of the time" in f.speedup.basis
    two = env(torch__num_threads=2)
    (g,) = competing_processes(RuleContext(record(s, cores=2, system=_waited(busy, 0.01),
                                                  facts=two)))  # fmt: skip
    assert g.severity is Severity.CRITICAL and g.speedup.factor == pytest.approx(180 / 10)


def test_competing_processes_none_named_say_why() -> None:
    """Others busy together, none of them named (each under the listing's least share): the
    finding says why none is named, not "unknown"."""
    s = steps(50, phases_ms={"forward": 100})
    system = samples(s, job_cpu=100.0, other_cpu=200.0)
    (f,) = competing_processes(RuleContext(record(s, system=system)))
    top = {e.metric: e.value for e in f.evidence}["top other processes"]
    assert top == UNNAMED and "none named: no single process" in f.explanation
    assert f.fix.snippet is not None and f.fix.snippet.startswith("top -o %CPU")


def test_competing_processes_in_the_doctor_give_no_figure_and_warn_at_most() -> None:
    """No job ran in the doctor's second-long look: the busy others are named, with no
    speed-up (the doctor's own CPU is no job's) and no critical (they may stop before a job
    starts)."""
    hog = (ProcessUsage(pid=42, name="pip", cpu_pct=190.0),)
    s = steps(10, phases_ms={"forward": 100})
    system = tuple(replace(x, top_others=hog) for x in samples(s, job_cpu=10.0, other_cpu=380.0))
    (run,) = competing_processes(RuleContext(record(s, system=system)))
    assert run.severity is Severity.CRITICAL and run.speedup.factor > 1.0
    (f,) = competing_processes(RuleContext(record((), system=system), checkup=True))
    assert f.severity is Severity.WARNING
    assert f.speedup.kind is SpeedupKind.NONE
    assert f.speedup.basis.startswith("not modelled: no job ran")
    assert f.explanation.startswith("In stepdoctor's look at the machine (1.0 s), processes ")
    assert "job CPU" not in {e.metric for e in f.evidence}
    assert f.fix.snippet is not None and f.fix.snippet.startswith("renice -n 19 -p 42 ")


def test_competing_processes_unnamed_say_how_to_find_them() -> None:
    s = steps(50, phases_ms={"forward": 100})
    (f,) = competing_processes(RuleContext(record(s, system=samples(s, other_cpu=200.0))))
    assert f.fix.snippet is not None and f.fix.snippet.startswith("top -o %CPU")


def test_competing_processes_silent_on_a_quiet_machine() -> None:
    s = steps(50, phases_ms={"forward": 100})
    assert competing_processes(RuleContext(record(s, system=samples(s, other_cpu=20.0)))) == []


def _gpu(*rows: tuple[float, tuple[GpuProcess, ...]]) -> tuple[GpuSample, ...]:
    """NVML readings of GPU 0 (80 GiB), 100 ms apart: (utilisation %, processes) each."""
    return tuple(
        GpuSample(t_ns=i * 100 * MS, index=0, util_pct=u, mem_total_bytes=80 * 2**30, processes=p)
        for i, (u, p) in enumerate(rows)
    )


_JOB = GpuProcess(pid=1, name="python", mem_bytes=2**30, is_job=True)
_IDLE = GpuProcess(pid=2, name="other", mem_bytes=2**31, is_job=False)


def test_competing_processes_on_the_gpu_an_idle_one_is_noted() -> None:
    s = steps(50, phases_ms={"forward": 100})
    # Alone on the GPU it left it idle, and it holds 2 of 80 GiB: worth a note, no more.
    gpu = _gpu((0.0, (_IDLE,)), (90.0, (_JOB, _IDLE)), (90.0, (_JOB, _IDLE)))
    (f,) = competing_processes(RuleContext(record(s, system=samples(s), gpu=gpu)))
    assert "other (pid 2 on GPU 0, 2048 MiB)" in f.explanation
    assert f.severity is Severity.INFO and "idle while only they" in f.explanation


def test_competing_processes_on_the_gpu_one_that_computes_or_holds_its_memory() -> None:
    s = steps(50, phases_ms={"forward": 100})
    busy = _gpu((60.0, (_IDLE,)), (90.0, (_JOB, _IDLE)))
    (f,) = competing_processes(RuleContext(record(s, system=samples(s), gpu=busy)))
    assert f.severity is Severity.WARNING and "60% busy" in f.explanation
    big = GpuProcess(pid=3, name="server", mem_bytes=30 * 2**30, is_job=False)
    (g,) = competing_processes(
        RuleContext(record(s, system=samples(s), gpu=_gpu((90.0, (_JOB, big)))))
    )
    assert g.severity is Severity.WARNING
    assert {e.metric: e.value for e in g.evidence}["GPU memory they hold"] == 0.375


def test_thread_oversubscription_fires_at_twice_the_cores() -> None:
    s = steps(50, phases_ms={"forward": 100})
    facts = env(cpu__affinity=2, torch__num_threads=16, env__OMP_NUM_THREADS=None)
    (f,) = thread_oversubscription(RuleContext(record(s, cores=2, facts=facts)))
    assert f.fix.snippet == "torch.set_num_threads(2)"
    assert {e.metric: e.value for e in f.evidence}["compute threads per core"] == 8.0


def test_thread_oversubscription_counts_workers_and_omp() -> None:
    s = steps(50, phases_ms={"forward": 100})
    facts = env(cpu__affinity=4, env__OMP_NUM_THREADS="4")
    loader = LoaderInfo(loader_id=1, num_workers=4)
    (f,) = thread_oversubscription(RuleContext(record(s, cores=4, facts=facts, loaders=[loader])))
    assert f.title == "8 compute threads on 4 cores"


WAITING = ("_bootstrap", "_worker_loop", "Queue.get", "_ConnectionBase.poll")
DECODING = ("_bootstrap", "_worker_loop", "_MapDatasetFetcher.fetch", "Decoded.__getitem__")


def _with_workers(idle: int, workers: int = 2, total: int = 200) -> RuleContext:
    """torch's 2 threads on 2 cores and ``workers`` DataLoader workers whose stack samples
    found them waiting for their next indices ``idle`` times in ``total``."""
    s = steps(50, phases_ms={"forward": 100})
    rec = record(s, cores=2, facts=env(cpu__affinity=2, torch__num_threads=2),
                 loaders=[LoaderInfo(loader_id=1, num_workers=workers)])  # fmt: skip
    sampled = {WORKER_PHASE: [(WAITING, idle), (DECODING, total - idle)]}
    return RuleContext(stacked(rec, sampled))


def test_thread_oversubscription_counts_workers_by_how_busy_they_were() -> None:
    # workers that wait for their next indices take no core from torch's threads (a healthy
    # job with 2 of them idle 88% of the time and 2 threads on 2 cores ran 1.3-1.5x slower
    # with the advised 1 thread)
    assert thread_oversubscription(_with_workers(idle=176)) == []
    # busy ones do: 2 threads and 3 workers busy 90% of the time, on 2 cores
    (f,) = thread_oversubscription(_with_workers(idle=20, workers=3))
    evidence = {e.metric: e.value for e in f.evidence}
    assert f.severity is Severity.WARNING and f.title == "5 compute threads on 2 cores"
    assert evidence["DataLoader workers idle, waiting for their next indices"] == 0.1
    assert evidence["compute threads per core"] == 2.35
    assert "3 DataLoader workers, busy 90% of the time, on 2 usable cores" in f.explanation
    # between the two: bursts of work that may take cores from the pool, or not: info, with
    # the measurement to make instead of a fix (4 workers busy 20% beside 2 threads: 1.4)
    (f,) = thread_oversubscription(_with_workers(idle=160, workers=4))
    assert f.severity is Severity.INFO and f.fix.snippet is None
    assert "stepdoctor tune --only threads" in f.fix.summary and f.speedup.factor == 1.0
    # workers too seldom sampled to tell count whole (as at start, in the doctor)
    (f,) = thread_oversubscription(_with_workers(idle=40, total=50))
    assert "DataLoader workers idle, waiting for their next indices" not in {
        e.metric for e in f.evidence
    }


def test_thread_oversubscription_silent_when_sized_to_cores() -> None:
    s = steps(50, phases_ms={"forward": 100})
    facts = env(cpu__affinity=4, torch__num_threads=4)
    assert thread_oversubscription(RuleContext(record(s, cores=4, facts=facts))) == []


def test_small_batch_when_per_step_costs_dominate() -> None:
    s = steps(100, phases_ms={"forward": 0.5, "optimizer": 0.5}, batch=1)
    (f,) = small_batch(RuleContext(record(s, cores=2, system=samples(s, job_cpu=190.0))))
    assert f.severity is Severity.CRITICAL
    assert abs(f.speedup.factor - 1 / (0.5 / 32 + 0.5)) < 1e-9


def test_small_batch_silent_for_big_batches_or_compute_bound_steps() -> None:
    s = steps(100, phases_ms={"forward": 0.5, "optimizer": 0.5}, batch=64)
    assert small_batch(RuleContext(record(s, system=samples(s)))) == []
    compute = steps(100, phases_ms={"forward": 10, "optimizer": 0.1}, batch=4)
    assert small_batch(RuleContext(record(compute, system=samples(compute)))) == []


def _dense_on_gpu(batch: int) -> ModelInfo:
    """A 256-512-512-10 MLP on a CUDA device, first called with ``batch`` samples."""
    sizes = [(256, 512), (512, 512), (512, 10)]
    return ModelInfo(
        model_id=1,
        class_name="Sequential",
        param_count=0,
        param_bytes=0,
        devices=("cuda",),
        input_shape=(batch, 256),
        layers=tuple(
            LayerInfo(name=str(i), kind="linear", params=0, in_features=a, out_features=b)
            for i, (a, b) in enumerate(sizes)
        ),
    )


def _busy(
    s: tuple[StepTiming, ...], util: float, name: str = "NVIDIA H200"
) -> tuple[GpuSample, ...]:
    start, end = s[0].start_ns, s[-1].end_ns
    return tuple(
        GpuSample(t_ns=t, index=0, name=name, util_pct=util, processes=(_JOB,))
        for t in range(start, end, 100 * MS)
    )


def test_small_batch_on_an_idle_gpu_models_batch_512_from_the_steps_and_the_layers() -> None:
    # Batches of 4 (from the model's input: no DataLoader), 1 ms steps, the GPU 6% busy: the
    # host's launches set the pace; at batch 512 the dense layers' 2.4 MFLOP a sample take
    # 1.2 GFLOP, 0.04 ms at half an H200's 67 TFLOP/s: the step stays 1 ms, 128x the samples.
    s = steps(1000, phases_ms={"forward": 0.3, "backward": 0.5, "optimizer": 0.2}, batch=None)
    ctx = RuleContext(record(s, system=samples(s), gpu=_busy(s, 6.0), models=(_dense_on_gpu(4),)))
    (f,) = small_batch(ctx)
    assert f.severity is Severity.CRITICAL and f.title == "Batches of 4 leave the GPU 94% idle"
    assert f.speedup.factor == pytest.approx(128.0)
    # Unsized layers (no GPU in the peaks table): the GPU's busy time grows with the batch,
    # and the gain is capped where the GPU becomes the bottleneck, 1 / 6%.
    other = RuleContext(
        record(s, system=samples(s), gpu=_busy(s, 6.0, "Mystery GPU"), models=(_dense_on_gpu(4),))
    )
    (g,) = small_batch(other)
    assert g.speedup.factor == pytest.approx(1 / 0.06)


def test_small_batch_on_a_gpu_silent_when_busy_fed_slowly_or_unread() -> None:
    s = steps(1000, phases_ms={"forward": 0.3, "backward": 0.5, "optimizer": 0.2}, batch=None)
    model = (_dense_on_gpu(4),)
    busy = RuleContext(record(s, system=samples(s), gpu=_busy(s, 85.0), models=model))
    assert small_batch(busy) == []  # the GPU is busy: a larger batch is not free
    unread = RuleContext(record(s, system=samples(s), gpu=_busy(s, 6.0)[:2], models=model))
    # Two NVML readings say little: the host's per-step costs alone are judged, as on a CPU.
    (f,) = small_batch(unread)
    assert f.title == "Batches of 4 sample(s): per-step costs dominate"
    assert f.speedup.factor == pytest.approx(1 / (0.2 * 4 / 32 + 0.8))
    fed = steps(1000, phases_ms={"data_wait": 1.0, "forward": 0.3, "backward": 0.5}, batch=4)
    slow = RuleContext(record(fed, system=samples(fed), gpu=_busy(fed, 6.0), models=model))
    assert small_batch(slow) == []  # it waits for data: input-bound's finding, not this one


def _fp32_on_gpu(autocast: str | None, matmul: str = "highest") -> ModelInfo:
    return ModelInfo(
        model_id=7,
        class_name="Encoder",
        param_count=0,
        param_bytes=0,
        param_dtypes=("torch.float32",),
        devices=("cuda",),
        kinds={"linear": 12, "norm": 4},
        autocast=autocast,
        float32_matmul=matmul,
    )


def test_tensor_core_precision_models_autocast_and_tf32_from_the_busy_gpu() -> None:
    s = steps(100, phases_ms={"forward": 10, "backward": 20})
    facts = env(gpu__capability=9.0)

    def ctx(model: ModelInfo, util: float = 95.0, gpu: bool = True) -> RuleContext:
        readings = _busy(s, util) if gpu else ()
        return RuleContext(record(s, facts=facts, gpu=readings, models=(model,)))

    found = {f.title: f for f in tensor_core_precision(ctx(_fp32_on_gpu("off")))}
    amp = found["float32 training without mixed precision on tensor cores"]
    tf32 = found["float32 matmuls with TF32 off"]
    # Unsized layers: 60% of the busy GPU's time in matmuls, 989/67 and 494/67 times faster.
    assert amp.speedup.factor == pytest.approx(1 / (0.05 + 0.95 * (0.6 / (989 / 67) + 0.4)))
    assert tf32.speedup.factor == pytest.approx(1 / (0.05 + 0.95 * (0.6 / (494 / 67) + 0.4)))
    assert amp.severity is Severity.WARNING and "bfloat16" in amp.fix.summary
    # TF32 already on: autocast's gain over TF32, and no TF32 finding.
    (high,) = tensor_core_precision(ctx(_fp32_on_gpu("off", "high")))
    assert high.speedup.factor == pytest.approx(1 / (0.05 + 0.95 * (0.6 / (989 / 494) + 0.4)))
    # Autocast on, or not known (an older record): silent here (cudnn-disabled's note).
    assert tensor_core_precision(ctx(_fp32_on_gpu("torch.bfloat16"))) == []
    assert tensor_core_precision(ctx(_fp32_on_gpu(None))) == []
    # NVML never read the GPU: named, without a figure.
    unread = tensor_core_precision(ctx(_fp32_on_gpu("off"), gpu=False))
    assert unread and all(f.severity is Severity.INFO for f in unread)
    assert all(f.speedup.kind.value == "none" for f in unread)


def test_tensor_core_precision_silent_before_tensor_cores() -> None:
    s = steps(100, phases_ms={"forward": 10, "backward": 20})
    old = record(
        s, facts=env(gpu__capability=6.1), gpu=_busy(s, 95.0), models=(_fp32_on_gpu("off"),)
    )
    assert tensor_core_precision(RuleContext(old)) == []


def test_h2d_copies_on_a_gpu_job_bounded_by_the_gpus_own_work() -> None:
    s = steps(1000, phases_ms={"h2d": 6.0, "forward": 1.0, "backward": 2.0, "optimizer": 1.0})
    copies = env(torch__h2d_pageable=1000, torch__h2d_pinned=0)
    model = (_dense_on_gpu(256),)
    (f,) = h2d_copies(RuleContext(record(s, facts=copies, models=model)))
    assert f.severity is Severity.CRITICAL and f.title == "Copies to the GPU take 60% of each step"
    assert f.speedup.factor == pytest.approx(1 / 0.4)  # NVML unread: the copies removed
    assert "pageable memory" in f.explanation
    # NVML saw the GPU 50% busy: its own work bounds the step at half the time.
    busy = RuleContext(record(s, facts=copies, gpu=_busy(s, 50.0), models=model))
    (g,) = h2d_copies(busy)
    assert g.speedup.factor == pytest.approx(2.0)
    # The GPU 90% busy: the copies wait behind its work; noted, not flagged.
    behind = RuleContext(record(s, facts=copies, gpu=_busy(s, 90.0), models=model))
    (h,) = h2d_copies(behind)
    assert h.severity is Severity.INFO and h.speedup.factor == pytest.approx(1 / 0.9)


def test_h2d_copies_silent_for_cpu_jobs_and_small_copies() -> None:
    s = steps(100, phases_ms={"h2d": 6.0, "forward": 4.0})
    assert h2d_copies(RuleContext(record(s))) == []  # no model on a GPU
    small = steps(100, phases_ms={"h2d": 1.0, "forward": 9.0})
    assert h2d_copies(RuleContext(record(small, models=(_dense_on_gpu(256),)))) == []


def test_memory_limits_gpu_nearly_full_during_the_steps() -> None:
    from stepdoctor.rules.memory_limits import memory_limits

    s = steps(100, phases_ms={"forward": 10})
    model = (_dense_on_gpu(256),)

    def readings(used_gib: float) -> tuple[GpuSample, ...]:
        return tuple(
            GpuSample(
                t_ns=t,
                index=0,
                mem_used_bytes=int(used_gib * 2**30),
                mem_total_bytes=80 * 2**30,
                processes=(_JOB,),
            )
            for t in range(s[0].start_ns, s[-1].end_ns, 100 * MS)
        )

    facts = env(mem__total_bytes=64 * 2**30)
    (full,) = memory_limits(RuleContext(record(s, facts=facts, gpu=readings(76), models=model)))
    assert full.severity is Severity.CRITICAL and full.title == "GPU 0's memory 95% full"
    assert memory_limits(RuleContext(record(s, facts=facts, gpu=readings(40), models=model))) == []


def test_memory_limits_fragmented_gpu_memory_from_the_allocators_retries() -> None:
    from stepdoctor.rules.memory_limits import memory_limits

    s = steps(100, phases_ms={"forward": 10})
    model = (_dense_on_gpu(256),)
    facts = env(
        mem__total_bytes=64 * 2**30,
        cuda__alloc_retries=7,
        cuda__peak_reserved_bytes=70 * 2**30,
        cuda__peak_allocated_bytes=50 * 2**30,
        env__PYTORCH_CUDA_ALLOC_CONF=None,
    )
    (f,) = memory_limits(RuleContext(record(s, facts=facts, models=model)))
    assert f.title == "The GPU's memory is fragmented: 7 allocation retries"
    assert "expandable_segments:True" in f.fix.summary
    on = env(
        mem__total_bytes=64 * 2**30,
        cuda__alloc_retries=7,
        env__PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True",
    )
    (g,) = memory_limits(RuleContext(record(s, facts=on, models=model)))
    assert "already" in g.fix.summary


def test_the_probe_reads_the_caching_allocators_figures() -> None:
    from stepdoctor.probes.environment import _allocator

    class Cuda:
        @staticmethod
        def memory_stats() -> dict[str, int]:
            return {"num_alloc_retries": 3, "num_ooms": 0, "reserved_bytes.all.peak": 5}

    class Torch:
        cuda = Cuda

    facts = {f.key: f.value for f in _allocator(Torch)}
    assert facts == {
        "cuda.alloc_retries": 3,
        "cuda.ooms": 0,
        "cuda.peak_reserved_bytes": 5,
        "cuda.peak_allocated_bytes": 0,
    }
