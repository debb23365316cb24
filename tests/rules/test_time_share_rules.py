"""slow-callbacks, checkpoint-stalls and gc-pauses: rules graded on a share of step time."""

from __future__ import annotations

from dataclasses import replace

import pytest

from stepdoctor.model import (
    ConcurrencyStat,
    ModelInfo,
    Severity,
    SpeedupKind,
    StepTiming,
    SystemSample,
)
from stepdoctor.report import build_report
from stepdoctor.rules import RuleContext
from stepdoctor.rules.checkpoint_stalls import checkpoint_stalls
from stepdoctor.rules.context import UNSPLIT_SHARE, removal_speedup, speedup_if_removed
from stepdoctor.rules.gc_pauses import gc_pauses
from stepdoctor.rules.slow_callbacks import slow_callbacks
from tests.builders import record, samples, steps


def test_slow_callbacks_fires_on_other_time() -> None:
    s = steps(40, phases_ms={"forward": 50, "other": 50})
    (f,) = slow_callbacks(RuleContext(record(s)))
    assert f.severity is Severity.CRITICAL
    assert {e.metric: e.value for e in f.evidence}["mean time between phases per step"] == 50


def test_time_between_steps_the_loop_spends_off_the_cpu_is_a_wait_to_overlap() -> None:
    """30 ms between steps of 40, the loop's thread on a CPU 12% of the time: at least 83%
    of the time between steps it waited (a fetch asleep on a remote service): told as a
    wait, with the fix that overlaps it. On a CPU all the time: work, the usual fix."""
    s = steps(100, phases_ms={"forward": 5, "backward": 5, "other": 30})
    system = samples(s)
    t0 = system[0].t_ns

    def clocked(busy: float) -> tuple[SystemSample, ...]:
        return tuple(replace(x, main_thread_cpu_s=busy * (x.t_ns - t0) / 1e9) for x in system)

    (waits,) = slow_callbacks(RuleContext(record(s, system=clocked(0.12))))
    assert waits.title == "The loop waits between steps 75% of the time"
    assert waits.severity is Severity.CRITICAL
    assert {e.metric: e.value for e in waits.evidence}[
        "of it, the loop's thread off the CPU (at least)"
    ] == pytest.approx(1 - 0.12 / 0.75, abs=0.01)
    assert waits.fix.summary.startswith("Overlap the wait with the steps: about 4 fetches")
    assert "num_workers=4" in (waits.fix.snippet or "")  # 30 ms of wait over 10 of the rest
    (work,) = slow_callbacks(RuleContext(record(s, system=clocked(1.0))))
    assert work.title == "Work between steps takes 75% of the time"
    assert work.fix.summary.startswith("Run logging, metrics and evaluation every N steps")
    # the loop's thread off the CPU while the process used 1.8 of its 2 cores: work on the
    # library's own threads (a Keras callback's TensorFlow ops), not a wait
    pool = tuple(replace(x, job_cpu_pct=180.0) for x in clocked(0.12))
    (threads,) = slow_callbacks(RuleContext(record(s, cores=2, system=pool)))
    assert threads.title == "Work between steps takes 75% of the time"
    # on a GPU the loop's thread waits off the CPU in .item() for the GPU's own work
    cuda = ModelInfo(model_id=1, class_name="Net", param_count=1, param_bytes=4,
                     devices=("cuda",))  # fmt: skip
    on_gpu = record(s, system=clocked(0.12), models=(cuda,))
    (gpu,) = slow_callbacks(RuleContext(on_gpu))
    assert gpu.title == "Work between steps takes 75% of the time"


def test_slow_callbacks_is_a_symptom_when_threads_share_one_model() -> None:
    # a thread serving requests waits for the other threads' calls of the same model between
    # its own: that wait is shared-model-threads' contention, not callbacks
    s = steps(40, phases_ms={"forward": 50, "other": 50})
    stat = ConcurrencyStat(
        model_id=1, class_name="Sequential", calls=160, threads=4, max_concurrent=4,
        concurrent_calls=120,
    )  # fmt: skip
    (f,) = slow_callbacks(RuleContext(record(s, concurrency=(stat,))))
    assert f.severity is Severity.INFO
    assert "Sequential" in f.explanation and "Several threads call" in f.explanation
    alone = replace(stat, threads=1, max_concurrent=1, concurrent_calls=0)
    (f,) = slow_callbacks(RuleContext(record(s, concurrency=(alone,))))
    assert f.severity is Severity.CRITICAL


def test_steps_not_split_into_phases_say_nothing_of_work_between_them() -> None:
    """A loop marked by ``doc.step()`` alone (or a framework the hooks do not see): all of each
    step is ``other``. Nothing shows what is between steps: the rule is skipped, saying why,
    and no finding claims a figure from a share of 100% (it read "up to 1000.00x")."""
    s = steps(300, phases_ms={"other": 12}, every={20: {"other": 40}})
    report = build_report(record(s))
    assert "slow-callbacks" not in {f.rule for f in report.findings}
    (skipped,) = (r for r in report.skipped if r.rule == "slow-callbacks")
    assert "not split into phases" in skipped.reason
    assert all(f.speedup.factor < 10 for f in report.findings)
    # one timed phase of training anywhere is a split step: the rest of it is between phases;
    # a checkpoint or an evaluation timed in an unsplit loop splits nothing
    split = (*s[:-1], replace(s[-1], phase_ns={"other": 6_000_000, "forward": 6_000_000}))
    assert RuleContext(record(split)).steps_split and not RuleContext(record(s)).steps_split
    saved = (*s[:-1], replace(s[-1], phase_ns={"other": 6_000_000, "checkpoint": 6_000_000}))
    assert not RuleContext(record(saved)).steps_split


@pytest.mark.parametrize("share", [0.99, 0.999, 1.0])
def test_a_share_that_leaves_no_other_work_gets_no_figure(share: float) -> None:
    speedup = removal_speedup(share, "the pauses removed")
    assert speedup.kind is SpeedupKind.NONE and speedup.factor == 1.0
    assert speedup.basis.startswith(f"not modelled: {share:.1%} of the time")
    assert speedup_if_removed(share) == pytest.approx(1 / (1 - UNSPLIT_SHARE))


def test_a_share_that_leaves_other_work_is_modelled() -> None:
    speedup = removal_speedup(0.75, "the pauses removed")
    assert speedup.kind is SpeedupKind.MODELLED and speedup.factor == pytest.approx(4.0)
    assert speedup.basis == "the pauses removed"


def test_slow_callbacks_silent_for_loop_bookkeeping() -> None:
    s = steps(40, phases_ms={"forward": 90, "other": 10})
    assert slow_callbacks(RuleContext(record(s))) == []


def test_checkpoint_stalls_reports_period_and_ratio() -> None:
    s = steps(100, phases_ms={"forward": 10}, every={10: {"checkpoint": 40}})
    (f,) = checkpoint_stalls(RuleContext(record(s)))
    ev = {e.metric: e.value for e in f.evidence}
    assert ev["saves every"] == 10
    assert ev["saving step / plain step (median)"] == 5.0
    assert f.severity is Severity.CRITICAL  # 40 / (100 + 40) per 10 steps = 29%


def test_checkpoint_stalls_silent_without_saves() -> None:
    s = steps(100, phases_ms={"forward": 10})
    assert checkpoint_stalls(RuleContext(record(s))) == []


def test_gc_pauses_share_and_longest_pause() -> None:
    s = steps(50, phases_ms={"forward": 100}, gc_ms=10)
    (f,) = gc_pauses(RuleContext(record(s)))
    assert f.severity is Severity.WARNING
    assert {e.metric: e.value for e in f.evidence}["longest pause"] == 10.0


def test_gc_pauses_silent_for_rare_short_pauses() -> None:
    s = steps(50, phases_ms={"forward": 100}, gc_ms=1)
    assert gc_pauses(RuleContext(record(s))) == []


def _one_collection(s: tuple[StepTiming, ...], at: frozenset[int], pause_ms: float) -> tuple:
    return tuple(
        replace(
            st, gc_count=1, gc_pause_ns=int(pause_ms * 1e6), gc_max_pause_ns=int(pause_ms * 1e6)
        )
        if st.index in at
        else st
        for st in s
    )


def test_one_long_collection_is_no_rate() -> None:
    # tests/frameworks/lightning_job.py: one full pass of 310 ms after the warm-up, 19% of a
    # 60-step run, and none after it
    s = _one_collection(steps(60, phases_ms={"forward": 20}), frozenset({30}), 310)
    (f,) = gc_pauses(RuleContext(record(s)))
    assert f.severity is Severity.INFO
    assert "One collection of 310 ms (at step 30)" in f.explanation
    # two of them are a rate
    s = _one_collection(steps(60, phases_ms={"forward": 20}), frozenset({30, 50}), 310)
    (f,) = gc_pauses(RuleContext(record(s)))
    assert f.severity is Severity.CRITICAL
    assert "One collection" not in f.explanation
