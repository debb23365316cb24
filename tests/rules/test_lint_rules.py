"""Model rules (issue 3) on built model facts: oversized-network, tensor-core-alignment,
cpu-fallback-ops, autograd-in-inference and float64's static part."""

from __future__ import annotations

import dataclasses

import pytest

from stepdoctor.model import ConcurrencyStat, LayerInfo, ModelInfo, Severity, SpeedupKind
from stepdoctor.rules import RuleContext
from stepdoctor.rules.autograd_in_inference import autograd_in_inference
from stepdoctor.rules.cpu_fallback_ops import cpu_fallback_ops
from stepdoctor.rules.float64 import float64
from stepdoctor.rules.oversized_network import oversized_network
from stepdoctor.rules.tensor_core_alignment import tensor_core_alignment
from tests.builders import env, record, steps


def _dense(name: str, n_in: int, n_out: int) -> LayerInfo:
    return LayerInfo(
        name=name, kind="linear", params=n_in * n_out, in_features=n_in, out_features=n_out
    )


def _model(*layers: LayerInfo, **kw: object) -> ModelInfo:
    fields: dict[str, object] = {
        "model_id": 1,
        "class_name": "Net",
        "param_count": sum(x.params for x in layers),
        "param_bytes": 4 * sum(x.params for x in layers),
        "param_dtypes": ("torch.float32",),
        "devices": ("cpu",),
        "layers": layers,
    }
    fields.update(kw)
    return ModelInfo(**fields)  # type: ignore[arg-type]


def _ctx(*models: ModelInfo, **extra: object) -> RuleContext:
    return RuleContext(record((), models=models, **extra))


def test_small_model_is_within_every_limit() -> None:
    ok = _model(_dense("fc1", 256, 1024), _dense("fc2", 1024, 10), input_shape=(64, 256))
    assert oversized_network(_ctx(ok)) == []


def test_an_mlp_too_wide_is_sized_at_the_guides_limits() -> None:
    wide = _model(_dense("fc1", 256, 4096), _dense("fc2", 4096, 4096), _dense("out", 4096, 10))
    s = steps(50, phases_ms={"forward": 30, "backward": 40, "optimizer": 10, "data_wait": 20})
    (f,) = oversized_network(RuleContext(record(s, models=(wide,))))
    # At 2,048 units: 256x2048 + 2048x2048 + 2048x10 of 256x4096 + 4096x4096 + 4096x10.
    ratio = (256 * 2048 + 2048 * 2048 + 2048 * 10) / (256 * 4096 + 4096 * 4096 + 4096 * 10)
    assert f.speedup.kind is SpeedupKind.MODELLED
    assert f.speedup.factor == pytest.approx(1 / (1 - 0.8 * (1 - ratio)))
    # A structure the limits do not size (a conv stem) gets no figure; nor a model not run.
    conv = _model(LayerInfo(name="stem", kind="conv", params=1, in_features=3,
                            out_features=2048), _dense("fc", 256, 4096))  # fmt: skip
    (g,) = oversized_network(RuleContext(record(s, models=(conv,))))
    assert g.speedup.kind is SpeedupKind.NONE
    (h,) = oversized_network(_ctx(wide))
    assert h.speedup.kind is SpeedupKind.NONE


def test_oversized_dense_layer_classes_kernel_image_and_sequence() -> None:
    m = _model(
        LayerInfo(
            name="stem",
            kind="conv",
            params=3 * 64 * 81,
            in_features=3,
            out_features=64,
            kernel=(9, 9),
        ),
        _dense("hidden", 64, 4096),
        _dense("classifier", 4096, 50_000),
        input_shape=(8, 3, 1024, 768),
        flops_per_sample=1.5e9,
    )
    (f,) = oversized_network(_ctx(m))
    what = {e.metric: (e.value, e.threshold) for e in f.evidence}
    assert what["conv kernel side (stem)"] == (9, 7)
    assert what["dense units (hidden)"] == (4096, 2048)
    assert what["output classes (classifier)"] == (50_000, 10_000)
    assert what["input image side (input)"] == (1024, 600)
    assert what["forward FLOPs per sample"] == (1_500_000_000, None)
    assert "dense units (classifier)" not in what  # the output layer is judged as classes
    assert "9x9 in stem" in f.explanation and "sampled or hierarchical softmax" in f.fix.summary
    rnn = _model(
        LayerInfo(
            name="lstm",
            kind="lstm",
            params=1,
            in_features=8,
            out_features=2048,
            num_layers=12,
            batch_first=False,
        ),
        input_shape=(900, 4, 8),
    )
    (g,) = oversized_network(_ctx(rnn))
    metrics = {e.metric for e in g.evidence}
    assert {"recurrent layers (model)", "LSTM units (lstm)", "sequence length (input)"} <= metrics


def test_tensor_core_alignment_only_for_half_precision_on_cuda() -> None:
    layers = (_dense("proj", 1002, 1000), _dense("head", 1000, 16))
    half = _model(*layers, param_dtypes=("torch.float16",), devices=("cuda",))
    (f,) = tensor_core_alignment(_ctx(half))
    assert f.severity is Severity.WARNING and "proj (1002->1000)" in f.explanation
    assert tensor_core_alignment(_ctx(_model(*layers, devices=("cuda",)))) == []
    assert tensor_core_alignment(_ctx(_model(*layers, param_dtypes=("torch.float16",)))) == []


def test_cpu_fallback_ops_split_model() -> None:
    (f,) = cpu_fallback_ops(_ctx(_model(devices=("cpu", "cuda"))))
    assert "split between the CPU and cuda" in f.title
    assert cpu_fallback_ops(_ctx(_model(devices=("cuda",)))) == []


def _stats(calls: int, grad: int, train: int) -> ConcurrencyStat:
    return ConcurrencyStat(
        model_id=1,
        class_name="Net",
        calls=calls,
        threads=1,
        max_concurrent=1,
        concurrent_calls=0,
        grad_calls=grad,
        train_mode_calls=train,
    )


def test_autograd_in_inference_grad_and_train_mode() -> None:
    s = [
        dataclasses.replace(step, boundary="model")
        for step in steps(50, phases_ms={"forward": 10, "other": 1})
    ]
    model = _model(kinds={"dropout": 2, "linear": 3})
    mode, grad = autograd_in_inference(
        RuleContext(record(s, models=(model,), concurrency=(_stats(50, 50, 50),)))
    )
    assert mode.title == "Net runs inference in train mode"
    assert mode.speedup.kind is SpeedupKind.NONE  # wrong outputs, whatever the run's length
    assert grad.title == "Net runs inference with autograd on" and grad.speedup.factor > 1.0
    (only,) = autograd_in_inference(
        RuleContext(record(s, models=(model,), concurrency=(_stats(50, 50, 0),)))
    )
    assert only.title.endswith("with autograd on")
    ok = RuleContext(record(s, models=(model,), concurrency=(_stats(50, 0, 0),)))
    assert autograd_in_inference(ok) == []
    # Training (optimizer steps) is not inference.
    train = steps(50, phases_ms={"forward": 10, "backward": 10})
    busy = RuleContext(record(train, models=(model,), concurrency=(_stats(50, 50, 50),)))
    assert autograd_in_inference(busy) == []


def test_float64_default_dtype_and_buffers_without_steps() -> None:
    (f,) = float64(_ctx(_model(), facts=env(torch__default_dtype="torch.float64")))
    # No steps: no time to scale, so no figure (a constant is never a speed-up).
    assert "default dtype" in f.explanation and f.speedup.kind is SpeedupKind.NONE
    (g,) = float64(_ctx(_model(buffer_dtypes=("torch.float64",))))
    assert "buffers of Net" in g.explanation


def test_cpu_fallback_ops_syncs_inside_steps_and_mps_fallbacks() -> None:
    s = steps(40, phases_ms={"forward": 20, "backward": 40, "sync": 15, "optimizer": 5})
    gpu = _model(devices=("cuda",))
    (f,) = cpu_fallback_ops(RuleContext(record(s, models=(gpu,))))
    assert (
        f.severity is Severity.WARNING and f.title == "Device-to-host reads take 19% of each step"
    )
    assert f.speedup.factor == pytest.approx(1 / (1 - 15 / 80))
    calm = steps(40, phases_ms={"forward": 20, "backward": 40, "sync": 1})
    assert cpu_fallback_ops(RuleContext(record(calm, models=(gpu,)))) == []
    facts = env(torch__mps_fallback_ops="aten::sgn.out")
    (mps,) = cpu_fallback_ops(_ctx(_model(devices=("mps",)), facts=facts))
    assert "aten::sgn.out" in mps.explanation


def test_cpu_fallback_ops_tensors_built_on_cpu_inside_forward() -> None:
    s = steps(40, phases_ms={"forward": 20, "h2d": 4, "backward": 40})
    gpu = _model(devices=("cuda",))
    moved = env(torch__h2d_in_forward=80)
    (f,) = cpu_fallback_ops(RuleContext(record(s, models=(gpu,), facts=moved)))
    assert f.title.startswith("2.0 tensors a step")
    once = env(torch__h2d_in_forward=3)
    assert cpu_fallback_ops(RuleContext(record(s, models=(gpu,), facts=once))) == []
