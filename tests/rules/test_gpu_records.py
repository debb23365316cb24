"""The live GPU rules on real records of jobs on an NVIDIA H200 (``shared/gpu-runs/h200``:
``stepdoctor run`` of each job and its fixed twin, with the fix's true gain measured)."""

from __future__ import annotations

import pytest

from stepdoctor.model import Finding, Severity
from stepdoctor.record.reader import load_run
from stepdoctor.rules import RuleContext
from stepdoctor.rules.registry import run_rules
from tests.shared_data import GPU_RUNS, needs

H200 = GPU_RUNS / "h200"
pytestmark = needs(H200)


def _findings(name: str) -> list[Finding]:
    return run_rules(RuleContext(load_run(H200 / name)))[0]


def _loud(name: str) -> dict[str, Finding]:
    return {f.rule: f for f in _findings(name) if f.severity is not Severity.INFO}


def test_batches_of_4_on_the_gpu_are_named_with_the_gain_of_batch_512() -> None:
    # True gain of batch 512: 177x in samples/s (shared/gpu-runs/README.md).
    found = _loud("g05_small_batch.0")
    f = found["small-batch"]
    assert f.severity is Severity.CRITICAL
    assert 177 / 1.5 <= f.speedup.factor <= 177 * 1.5
    assert "small-batch" not in _loud("g05_small_batch.1")


@pytest.mark.parametrize(
    "name", ["g02_healthy.0", "g03_sync_metrics.1", "g04_fp32_matmul.1", "g01_input_bound.1"]
)
def test_no_small_batch_on_healthy_or_fixed_gpu_jobs(name: str) -> None:
    # g01_input_bound.1's batches of 128 leave the GPU half idle, but for its input: that
    # is input-bound's finding.
    assert "small-batch" not in _loud(name)


@pytest.mark.parametrize("name", ["g03_sync_metrics.0", "g04_fp32_matmul.0", "g04_fp32_matmul.1"])
def test_no_cpu_size_limits_for_models_on_the_gpu(name: str) -> None:
    # 4,096- and 8,192-unit layers past the DL4J guide's CPU limit of 2,048: what keeps an
    # H200 busy, not a fault.
    assert all(f.rule != "oversized-network" for f in _findings(name))


def test_the_input_bound_job_keeps_its_cause_on_top() -> None:
    (top, *_) = [f for f in _findings("g01_input_bound.0") if f.severity is not Severity.INFO]
    assert top.rule == "input-bound" and top.severity is Severity.CRITICAL


# The GPU zoo (tests/scenarios_gpu/) run on an H200 on 2026-11-28 (benchmarks/gpu_zoo.py
# --runs; true gains from --gains in gains.json), kept in shared/gpu-runs/h200-zoo.
ZOO = GPU_RUNS / "h200-zoo"


def _zoo(name: str) -> list[Finding]:
    return run_rules(RuleContext(load_run(ZOO / name)))[0]


@needs(ZOO)
def test_float32_on_tensor_cores_is_named_with_the_gain_of_autocast() -> None:
    # True gain of bf16 autocast on the 8,192-wide float32 MLP: 9.58x.
    (top, *_) = _zoo("g05_fp32_matmul.0")
    assert top.rule == "tensor-core-precision" and top.severity is Severity.CRITICAL
    assert 9.58 / 1.3 <= top.speedup.factor <= 9.58 * 1.3
    assert all(f.rule != "tensor-core-precision" for f in _zoo("g05_fp32_matmul.1"))


@needs(ZOO)
def test_tf32_off_is_named_and_the_fixed_job_is_not_told_to_turn_it_on() -> None:
    found = [f for f in _zoo("g06_tf32_off.0") if f.rule == "tensor-core-precision"]
    assert {f.title for f in found} >= {"float32 matmuls with TF32 off"}
    assert all(f.severity is not Severity.INFO for f in found)
    fixed = [f.title for f in _zoo("g06_tf32_off.1") if f.rule == "tensor-core-precision"]
    assert "float32 matmuls with TF32 off" not in fixed


@needs(ZOO)
@pytest.mark.parametrize("name", ["h01_cnn_resident.0", "h02_transformer_bf16.0"])
def test_models_under_autocast_are_not_told_to_use_it(name: str) -> None:
    assert all(f.rule != "tensor-core-precision" for f in _zoo(name))


@needs(ZOO)
def test_pageable_copies_are_named_with_a_gain_near_keeping_the_data_on_the_gpu() -> None:
    # True gain of data resident on the GPU: 7.00x; h2d is 87% of the faulty job's step.
    (top, *_) = _zoo("g03_pageable_copies.0")
    assert top.rule == "h2d-copies" and top.severity is Severity.CRITICAL
    assert 7.0 / 1.3 <= top.speedup.factor <= 7.0 * 1.3
    assert all(f.rule != "h2d-copies" for f in _zoo("g03_pageable_copies.1"))
