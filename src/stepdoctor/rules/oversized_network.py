"""oversized-network: the model is past the sizes that train well on the hardware at hand.

Detects, with the DL4J performance guide's limits ("Check network size and structure"): more
than ~100 conv layers, ~10 recurrent layers or ~20 dense layers (a pure MLP); inputs larger
than ~600x600 pixels; more than 10,000 output classes; conv kernels above 7x7 or more than
1,024 channels; dense layers over 2,048 units; LSTM/GRU over 1,024 units; more than 100 M
parameters; recurrent sequences longer than a few hundred steps.
Evidence: each limit exceeded with the layer's qualified name, the parameter count and the
forward FLOPs per sample when counted.
Fix: the smaller structure that does the same job (downsample, fewer/narrower layers,
sampled softmax, truncated BPTT).

The limits are for models on the CPU only: on a GPU a wide layer is what keeps it busy, and
what bounds a model there is its memory (memory-limits).
"""

from __future__ import annotations

from dataclasses import dataclass

from stepdoctor.model import (
    Evidence,
    Finding,
    Fix,
    LayerInfo,
    ModelInfo,
    Phase,
    Severity,
    Speedup,
)
from stepdoctor.rules._facts import distinct_models, same_models
from stepdoctor.rules.context import RuleContext, speedup_if_removed
from stepdoctor.rules.registry import rule

__all__ = [
    "MAX_CHANNELS",
    "MAX_CLASSES",
    "MAX_CONV_LAYERS",
    "MAX_DENSE_LAYERS",
    "MAX_DENSE_UNITS",
    "MAX_IMAGE_SIDE",
    "MAX_KERNEL",
    "MAX_PARAMS",
    "MAX_RECURRENT_LAYERS",
    "MAX_RECURRENT_UNITS",
    "MAX_SEQUENCE",
    "on_cpu",
    "oversized_network",
]

# All from DL4J's performance guide, "Check network size and structure" (shared/reference):
# sizes past which networks are slow to train, especially on CPUs.
MAX_CONV_LAYERS = 100
MAX_RECURRENT_LAYERS = 10
MAX_DENSE_LAYERS = 20
MAX_IMAGE_SIDE = 600
MAX_CLASSES = 10_000
MAX_KERNEL = 7
MAX_CHANNELS = 1024
MAX_DENSE_UNITS = 2048
MAX_RECURRENT_UNITS = 1024
MAX_PARAMS = 100_000_000
#: "Longer than a few hundred steps" without truncated backpropagation through time.
MAX_SEQUENCE = 500

_RECURRENT = ("lstm", "gru", "rnn")


@dataclass(frozen=True)
class _Excess:
    what: str
    where: str
    value: int
    limit: int
    advice: str
    shown: str = ""
    """How the value reads in text when not a plain number (a kernel "9x9")."""


@rule(
    id="oversized-network",
    title="The network is larger than it trains well",
    requires=("model",),
    scope="model",
)
def oversized_network(ctx: RuleContext) -> list[Finding]:
    """Flag each model on the CPU past one of the guide's size limits."""
    return [
        _finding(m, ex, copies, _speedup(ctx, m, ex))
        for m, copies in distinct_models(ctx.record.models)
        if on_cpu(m) and (ex := excesses(m))
    ]


def on_cpu(model: ModelInfo) -> bool:
    """Whether the model's parameters are on the CPU only (a model with none: its devices are
    unknown, and the CPU's limits apply)."""
    return all(device == "cpu" for device in model.devices)


#: The excesses whose fix ``_speedup`` can size: dense layers brought to the guide's limits.
_DENSE_EXCESSES = frozenset({"dense units", "output classes"})


def _speedup(ctx: RuleContext, model: ModelInfo, found: list[_Excess]) -> Speedup:
    """A model of dense layers only, too wide or with too many classes: its compute with each
    layer at the guide's limit (a dense layer's forward, backward and update cost grow with
    its inputs x outputs), over the share of the step the compute takes."""
    none = Speedup.none("not estimated: depends on the smaller structure chosen")
    if not ctx.steps or any(e.what not in _DENSE_EXCESSES for e in found):
        return none
    dense = [x for x in model.layers if x.kind == "linear"]
    if not dense or len(dense) != len(model.layers):
        return none
    output = _output(model)
    before = after = 0
    previous: tuple[int, int] | None = None  # (out, out at the limit) of the layer before
    for layer in dense:
        n_in, n_out = layer.in_features or 0, layer.out_features or 0
        limit = MAX_CLASSES if layer is output else MAX_DENSE_UNITS
        new_out = min(n_out, limit)
        new_in = previous[1] if previous is not None and previous[0] == n_in else n_in
        before += n_in * n_out
        after += new_in * new_out
        previous = (n_out, new_out)
    if not before or after >= before:
        return none
    ratio = after / before
    compute = ctx.share(Phase.FORWARD, Phase.BACKWARD, Phase.OPTIMIZER, Phase.TRAIN_STEP)
    return Speedup(
        factor=speedup_if_removed(compute * (1 - ratio)),
        basis=f"the dense layers at the guide's limits ({MAX_DENSE_UNITS:,} units, "
        f"{MAX_CLASSES:,} classes) do {ratio:.0%} of the multiply-adds; forward, backward "
        f"and the update ({compute:.0%} of the step) shrink alike",
    )


def excesses(model: ModelInfo) -> list[_Excess]:
    """Every limit ``model`` is past."""
    found: list[_Excess] = []
    conv = [x for x in model.layers if x.kind == "conv"]
    dense = [x for x in model.layers if x.kind == "linear"]
    recurrent = [x for x in model.layers if x.kind in _RECURRENT]
    if len(conv) > MAX_CONV_LAYERS:
        found.append(
            _Excess("conv layers", "model", len(conv), MAX_CONV_LAYERS, "use a shallower CNN")
        )
    depth = sum(x.num_layers for x in recurrent)
    if depth > MAX_RECURRENT_LAYERS:
        found.append(
            _Excess("recurrent layers", "model", depth, MAX_RECURRENT_LAYERS, "stack fewer layers")
        )
    if not conv and not recurrent and len(dense) > MAX_DENSE_LAYERS:
        found.append(
            _Excess("dense layers", "model", len(dense), MAX_DENSE_LAYERS, "use fewer layers")
        )
    found += _layer_excesses(model)
    found += _input_excesses(model, conv, recurrent)
    if model.param_count > MAX_PARAMS:
        found.append(
            _Excess(
                "parameters",
                "model",
                model.param_count,
                MAX_PARAMS,
                "distil or prune, or train on GPUs",
            )
        )
    return found


def _layer_excesses(model: ModelInfo) -> list[_Excess]:
    found = []
    output = _output(model)
    for layer in model.layers:
        if layer.kind == "conv":
            if layer.kernel and max(layer.kernel) > MAX_KERNEL:
                found.append(
                    _Excess(
                        "conv kernel side",
                        layer.name,
                        max(layer.kernel),
                        MAX_KERNEL,
                        "stack 3x3 convolutions instead",
                        shown="x".join(map(str, layer.kernel)),
                    )
                )
            channels = max(layer.in_features or 0, layer.out_features or 0)
            if channels > MAX_CHANNELS:
                found.append(
                    _Excess(
                        "conv channels",
                        layer.name,
                        channels,
                        MAX_CHANNELS,
                        "use fewer channels or 1x1 bottlenecks",
                    )
                )
        elif layer.kind == "linear" and (layer.out_features or 0) > MAX_DENSE_UNITS:
            if layer is output:
                continue  # the output layer: judged as classes below
            found.append(
                _Excess(
                    "dense units",
                    layer.name,
                    layer.out_features or 0,
                    MAX_DENSE_UNITS,
                    "use narrower layers",
                )
            )
        elif layer.kind in _RECURRENT and (layer.out_features or 0) > MAX_RECURRENT_UNITS:
            found.append(
                _Excess(
                    f"{layer.kind.upper()} units",
                    layer.name,
                    layer.out_features or 0,
                    MAX_RECURRENT_UNITS,
                    "use a smaller hidden size",
                )
            )
    if output is not None and (output.out_features or 0) > MAX_CLASSES:
        found.append(
            _Excess(
                "output classes",
                output.name,
                output.out_features or 0,
                MAX_CLASSES,
                "use a sampled or hierarchical softmax (or adaptive softmax)",
            )
        )
    return found


def _output(model: ModelInfo) -> LayerInfo | None:
    """The last dense layer: the classifier of a classification model."""
    dense = [x for x in model.layers if x.kind == "linear"]
    return dense[-1] if dense else None


def _input_excesses(
    model: ModelInfo, conv: list[LayerInfo], recurrent: list[LayerInfo]
) -> list[_Excess]:
    shape = model.input_shape
    found = []
    if conv and len(shape) == 4 and max(shape[2], shape[3]) > MAX_IMAGE_SIDE:
        found.append(
            _Excess(
                "input image side",
                "input",
                max(shape[2], shape[3]),
                MAX_IMAGE_SIDE,
                "downsample or crop the images",
                shown=f"{shape[2]}x{shape[3]}",
            )
        )
    if recurrent and len(shape) == 3:
        first = recurrent[0]
        length = shape[1] if first.batch_first else shape[0]
        if length > MAX_SEQUENCE:
            found.append(
                _Excess(
                    "sequence length",
                    "input",
                    length,
                    MAX_SEQUENCE,
                    "use truncated backpropagation through time (split the sequence and "
                    "detach the hidden state between chunks)",
                )
            )
    return found


def _finding(model: ModelInfo, found: list[_Excess], copies: int, speedup: Speedup) -> Finding:
    evidence = [
        Evidence(
            metric=f"{e.what} ({e.where})",
            value=e.value,
            threshold=e.limit,
            source="DL4J performance guide",
        )
        for e in found
    ]
    evidence.append(Evidence(metric="parameters", value=model.param_count, source="model"))
    if model.flops_per_sample is not None:
        evidence.append(
            Evidence(
                metric="forward FLOPs per sample",
                value=round(model.flops_per_sample),
                source="torch.utils.flop_counter",
            )
        )
    worst = ", ".join(
        f"{e.what} {e.shown or f'{e.value:,}'} in {e.where} (limit {e.limit:,})" for e in found[:3]
    )
    advice = "; ".join(dict.fromkeys(f"{e.what}: {e.advice}" for e in found))
    return Finding(
        rule="oversized-network",
        severity=Severity.WARNING,
        title=f"{model.class_name} is past {len(found)} size limit(s)",
        explanation=(
            f"{model.class_name} has {worst}. Networks past these sizes train slowly, on CPUs "
            "especially (DL4J's performance guide)." + same_models(copies)
        ),
        evidence=tuple(evidence),
        speedup=speedup,
        fix=Fix(summary=advice[0].upper() + advice[1:] + "."),
    )
