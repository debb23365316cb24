"""float64 and shared-model-threads: rules on what the job's model and data look like."""

from __future__ import annotations

from stepdoctor.model import ConcurrencyStat, ModelInfo, Severity, SpeedupKind
from stepdoctor.rules import RuleContext
from stepdoctor.rules.float64 import float64
from stepdoctor.rules.shared_model_threads import shared_model_threads
from tests.builders import record, steps


def _model(dtype: str) -> ModelInfo:
    return ModelInfo(
        model_id=1, class_name="Net", param_count=10, param_bytes=80, param_dtypes=(dtype,)
    )


def test_float64_parameters() -> None:
    s = steps(20, phases_ms={"forward": 30, "backward": 30, "data_wait": 40})
    (f,) = float64(RuleContext(record(s, models=(_model("torch.float64"),))))
    assert "parameters or buffers of Net" in f.explanation
    assert abs(f.speedup.factor - 1 / (1 - 0.3)) < 1e-6


def test_float64_batches_and_silence_for_float32() -> None:
    s = steps(20, phases_ms={"forward": 50})
    (f,) = float64(RuleContext(record(s, batch_dtypes=("torch.float64", "torch.int64"))))
    assert "batches" in f.explanation and f.severity is Severity.WARNING
    # A float32 model fed float64 batches computes in float32 (the job casts them): only the
    # cast is saved, so no compute speed-up is claimed and it is worth knowing, not pressing.
    (g,) = float64(RuleContext(record(s, models=(_model("torch.float32"),),
                                      batch_dtypes=("torch.float64",))))  # fmt: skip
    assert g.severity is Severity.INFO and g.speedup.kind is SpeedupKind.NONE
    assert "cast" in g.title
    assert (
        float64(
            RuleContext(
                record(s, models=(_model("torch.float32"),), batch_dtypes=("torch.float32",))
            )
        )
        == []
    )


def test_shared_model_threads() -> None:
    stat = ConcurrencyStat(
        model_id=1,
        class_name="Net",
        calls=100,
        threads=4,
        max_concurrent=4,
        concurrent_calls=80,
        solo_mean_ns=1e6,
        concurrent_mean_ns=8e6,
    )
    (f,) = shared_model_threads(
        RuleContext(record(steps(5, phases_ms={"forward": 1}), concurrency=(stat,)))
    )
    assert f.speedup.factor == 2.0
    assert "4 threads" in f.title


def test_shared_model_threads_silent_for_one_thread_or_rare_overlap() -> None:
    one = ConcurrencyStat(
        model_id=1, class_name="Net", calls=100, threads=1, max_concurrent=1, concurrent_calls=0
    )
    rare = ConcurrencyStat(
        model_id=2, class_name="Net", calls=100, threads=2, max_concurrent=2, concurrent_calls=2
    )
    ctx = RuleContext(record(steps(5, phases_ms={"forward": 1}), concurrency=(one, rare)))
    assert shared_model_threads(ctx) == []
