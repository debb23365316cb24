"""Model facts: layer kinds and sizes, parameters, devices, dtypes, FLOPs (observations only).

torch is imported lazily, inside the functions: the core imports this module without torch.
The thresholds that judge these facts live in the model rules (``rules/oversized_network.py``
and friends).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from stepdoctor.model import LayerInfo, ModelInfo

__all__ = ["describe_model", "first_tensor"]


def describe_model(
    model: Any,
    model_id: int | None = None,
    *,
    example_input: Any = None,
    input_shape: tuple[int, ...] = (),
    input_dtype: str | None = None,
) -> ModelInfo:
    """Describe a torch module.

    Args:
        model: the ``torch.nn.Module``.
        model_id: the id the hot path knows it by (default ``id(model)``).
        example_input: a batch to count forward FLOPs with (a tensor, a tuple of positional
            arguments or a dict of keyword arguments). The model runs once under
            ``torch.no_grad()`` in eval mode, and its train/eval flags are put back.
        input_shape / input_dtype: what the job's first call carried, when no example is run.
    """
    import torch

    params = list(model.parameters())
    buffers = list(model.buffers())
    leaves = [(name, m) for name, m in model.named_modules() if not any(True for _ in m.children())]
    kinds: dict[str, int] = {}
    layers: list[LayerInfo] = []
    for name, module in leaves:
        kind = _kind(torch.nn, module)
        kinds[kind] = kinds.get(kind, 0) + 1
        layer = _layer(torch.nn, name or type(module).__name__, kind, module)
        if layer is not None:
            layers.append(layer)
    flops = None
    if example_input is not None:
        tensor = first_tensor(example_input)
        if tensor is not None:
            input_shape = tuple(int(d) for d in tensor.shape)
            input_dtype = str(tensor.dtype)
        flops = _flops_per_sample(torch, model, example_input, input_shape)
    return ModelInfo(
        model_id=id(model) if model_id is None else model_id,
        class_name=type(model).__name__,
        param_count=sum(int(p.numel()) for p in params),
        param_bytes=sum(int(p.numel()) * int(p.element_size()) for p in params),
        param_dtypes=tuple(sorted({str(p.dtype) for p in params})),
        buffer_dtypes=tuple(sorted({str(b.dtype) for b in buffers})),
        devices=tuple(sorted({str(t.device.type) for t in (*params, *buffers)})),
        module_count=sum(1 for _ in model.modules()),
        layers=tuple(layers),
        kinds=kinds,
        training=bool(model.training),
        input_shape=input_shape,
        input_dtype=input_dtype,
        flops_per_sample=flops,
    )


def first_tensor(value: Any) -> Any:
    """Return the first tensor-like (has ``shape`` and ``dtype``) in a nested batch."""
    for item in _walk(value):
        if hasattr(item, "shape") and hasattr(item, "dtype"):
            return item
    return None


def _walk(value: Any, depth: int = 0) -> Iterator[Any]:
    yield value
    if depth >= 3:
        return
    if isinstance(value, dict):
        for item in value.values():
            yield from _walk(item, depth + 1)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _walk(item, depth + 1)


def _kind(nn: Any, module: Any) -> str:
    if isinstance(module, nn.modules.conv._ConvNd):
        return "conv"
    if isinstance(module, nn.Linear):
        return "linear"
    if isinstance(module, nn.LSTM):
        return "lstm"
    if isinstance(module, nn.GRU):
        return "gru"
    if isinstance(module, nn.RNNBase):
        return "rnn"
    if isinstance(module, (nn.Embedding, nn.EmbeddingBag)):
        return "embedding"
    if isinstance(module, nn.modules.dropout._DropoutNd):
        return "dropout"
    if isinstance(module, nn.modules.batchnorm._BatchNorm):
        return "batchnorm"
    if isinstance(module, (nn.LayerNorm, nn.GroupNorm, nn.modules.instancenorm._InstanceNorm)):
        return "norm"
    if type(module).__module__ == "torch.nn.modules.activation":
        return "activation"
    return "other"


def _layer(nn: Any, name: str, kind: str, module: Any) -> LayerInfo | None:
    params = sum(int(p.numel()) for p in module.parameters(recurse=False))
    if kind == "conv":
        return LayerInfo(
            name=name,
            kind=kind,
            params=params,
            in_features=int(module.in_channels),
            out_features=int(module.out_channels),
            kernel=tuple(int(k) for k in module.kernel_size),
        )
    if kind == "linear":
        return LayerInfo(
            name=name,
            kind=kind,
            params=params,
            in_features=int(module.in_features),
            out_features=int(module.out_features),
        )
    if kind in ("lstm", "gru", "rnn"):
        return LayerInfo(
            name=name,
            kind=kind,
            params=params,
            in_features=int(module.input_size),
            out_features=int(module.hidden_size),
            num_layers=int(module.num_layers),
            batch_first=bool(module.batch_first),
        )
    if kind == "embedding":
        return LayerInfo(
            name=name,
            kind=kind,
            params=params,
            in_features=int(module.embedding_dim),
            out_features=int(module.num_embeddings),
        )
    return None


def _flops_per_sample(
    torch: Any, model: Any, example: Any, input_shape: tuple[int, ...]
) -> float | None:
    from torch.utils.flop_counter import FlopCounterMode

    modes = [(m, m.training) for m in model.modules()]
    try:
        model.eval()  # no batch-norm statistics updated, no dropout randomness used
        counter = FlopCounterMode(display=False)
        with torch.no_grad(), counter:
            if isinstance(example, dict):
                model(**example)
            elif isinstance(example, tuple):
                model(*example)
            else:
                model(example)
    finally:
        for module, training in modes:
            module.training = training
    total = float(counter.get_total_flops())
    batch = input_shape[0] if input_shape else 1
    return total / max(1, batch)
