"""Data-only and compute-only throughput (the TensorFlow article's "programmatic techniques":
time the input pipeline alone and the model alone; the slower one bounds the job).

Both take the job's own objects, time a bounded number of batches (and never longer than a
time budget), and put back everything they changed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from stepdoctor.collect.hooks.batches import batch_size_of
from stepdoctor.errors import UsageError
from stepdoctor.model.experiments import BoundVerdict, Throughput
from stepdoctor.probes.model_lint import first_tensor

__all__ = ["BOUND_MARGIN", "compute_only", "data_only", "verdict"]

#: Two throughputs closer than this are "balanced": fournex accepts a tuning change only when
#: it is at least 8% faster, as differences below that are within run-to-run noise.
BOUND_MARGIN = 0.08


def data_only(
    loader: Iterable[Any],
    *,
    batches: int = 50,
    warmup: int = 2,
    budget_s: float = 10.0,
    clock: Callable[[], float] = time.perf_counter,
) -> Throughput:
    """Time a fresh pass over ``loader`` with no model: how fast the input pipeline alone is.

    Args:
        loader: a DataLoader (or any re-iterable); a new iterator is made, so the job's own
            iterator is not advanced. An iterator that is its own iterable (a generator)
            cannot be restarted and is refused.
        batches: batches to time after ``warmup``.
        warmup: batches fetched first and not timed (worker processes start, caches fill).
        budget_s: stop timing after this long even if fewer batches came.
    """
    if isinstance(loader, Iterator):
        raise UsageError("data_only needs a re-iterable loader; this iterator cannot restart")
    rng = _save_rng()  # a shuffling sampler draws its seed from the global RNG
    it = _fresh_iterator(loader)
    try:
        seen = 0
        for _ in range(warmup):
            if next(it, None) is None:
                break
            seen += 1
        count = samples = 0
        known = True
        start = clock()
        deadline = start + budget_s
        stopped = False
        while count < batches:
            batch = next(it, None)
            if batch is None:
                break
            count += 1
            size = batch_size_of(batch)
            if size is None:
                known = False
            else:
                samples += size
            if clock() >= deadline:
                stopped = count < batches
                break
        seconds = clock() - start
    finally:
        _close(it)
        _restore_rng(rng)
    note = "" if count else "the loader gave no batch after the warm-up"
    return Throughput(
        name="data-only",
        batches=count,
        samples=samples if known and count else None,
        seconds=seconds,
        warmup_batches=seen,
        stopped_by_budget=stopped,
        note=note,
    )


def compute_only(
    model: Any,
    batch: Any,
    loss_fn: Callable[..., Any] | None = None,
    *,
    steps: int = 20,
    warmup: int = 2,
    budget_s: float = 10.0,
    clock: Callable[[], float] = time.perf_counter,
) -> Throughput:
    """Replay one real batch through forward + backward (no optimizer step): how fast the
    model alone is. Weights, buffers (batch-norm statistics), gradients, train/eval mode and
    the RNG state are restored afterwards.

    Args:
        model: the ``torch.nn.Module``.
        batch: one batch as the loader yields it: ``(inputs, targets)``, a tensor, or a dict.
        loss_fn: ``loss_fn(output, targets)``; without it (or without targets) the mean of the
            output is the loss (backward costs about the same whatever the scalar).
        steps / warmup / budget_s: as in ``data_only``.
    """
    import torch

    inputs, targets = _split_batch(batch)
    device = _device_of(model)
    inputs = _to(inputs, device)
    targets = _to(targets, device)
    saved = _save(torch, model)
    sync = _synchronizer(torch, device)
    try:  # the model runs in the modes the job left it in (a frozen batch-norm stays frozen)
        for _ in range(warmup):
            _step(model, inputs, targets, loss_fn)
        sync()
        count = 0
        start = clock()
        deadline = start + budget_s
        stopped = False
        while count < steps:
            _step(model, inputs, targets, loss_fn)
            count += 1
            if count < steps and clock() >= deadline:
                stopped = True
                break
        sync()
        seconds = clock() - start
    finally:
        _restore(torch, model, saved)
    size = batch_size_of(inputs if not isinstance(inputs, dict) else list(inputs.values()))
    return Throughput(
        name="compute-only",
        batches=count,
        samples=None if size is None else size * count,
        seconds=seconds,
        warmup_batches=warmup,
        stopped_by_budget=stopped,
        note="" if loss_fn is not None and targets is not None else "loss: mean of the output",
    )


def verdict(
    data: Throughput,
    compute: Throughput,
    *,
    achieved_per_sec: float | None = None,
    margin: float = BOUND_MARGIN,
) -> BoundVerdict:
    """Input-bound when the input pipeline alone is slower than the model alone by more than
    ``margin``; compute-bound when faster by more; balanced otherwise.

    Args:
        achieved_per_sec: the job's own throughput, in samples/s when both experiments know
            their samples, else batches/s.
    """
    d, c = data.samples_per_sec, compute.samples_per_sec
    if d is not None and c is not None:
        unit = "samples/s"
    else:
        d, c, unit = data.batches_per_sec, compute.batches_per_sec, "batches/s"
    if d < c * (1 - margin):
        bound = "input"
    elif c < d * (1 - margin):
        bound = "compute"
    else:
        bound = "balanced"
    return BoundVerdict(
        data=data,
        compute=compute,
        bound=bound,
        ceiling_per_sec=min(d, c),
        unit=unit,
        achieved_per_sec=achieved_per_sec,
        margin=margin,
    )


# -- internals ---------------------------------------------------------------------------


def _save_rng() -> dict[str, Any]:
    """The global random states a data pipeline may draw from (torch, random, numpy)."""
    import random
    import sys

    import torch

    states: dict[str, Any] = {"torch": torch.get_rng_state(), "random": random.getstate()}
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        states["numpy"] = numpy.random.get_state()
    return states


def _restore_rng(states: dict[str, Any]) -> None:
    import random
    import sys

    import torch

    torch.set_rng_state(states["torch"])
    random.setstate(states["random"])
    numpy = sys.modules.get("numpy")
    if numpy is not None and "numpy" in states:
        numpy.random.set_state(states["numpy"])


class _Saved:
    def __init__(self) -> None:
        self.state: dict[str, Any] = {}
        self.grads: list[Any] = []
        self.training: dict[Any, bool] = {}
        self.rng: dict[str, Any] = {}
        self.cuda_rng: Any = None


def _save(torch: Any, model: Any) -> _Saved:
    saved = _Saved()
    saved.state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    saved.grads = [None if p.grad is None else p.grad.detach().clone() for p in model.parameters()]
    saved.training = {m: m.training for m in model.modules()}
    saved.rng = _save_rng()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        saved.cuda_rng = torch.cuda.get_rng_state_all()
    return saved


def _restore(torch: Any, model: Any, saved: _Saved) -> None:
    with torch.no_grad():
        current = model.state_dict()
        for key, value in saved.state.items():
            current[key].copy_(value)
    for param, grad in zip(model.parameters(), saved.grads, strict=True):
        param.grad = grad
    for module, training in saved.training.items():
        module.training = training
    _restore_rng(saved.rng)
    if saved.cuda_rng is not None:
        torch.cuda.set_rng_state_all(saved.cuda_rng)


def _step(model: Any, inputs: Any, targets: Any, loss_fn: Callable[..., Any] | None) -> None:
    for param in model.parameters():
        param.grad = None
    if isinstance(inputs, dict):
        output = model(**inputs)
    elif isinstance(inputs, tuple):
        output = model(*inputs)
    else:
        output = model(inputs)
    if loss_fn is not None and targets is not None:
        loss = loss_fn(output, targets)
    else:
        tensor = first_tensor(output)
        if tensor is None:
            raise UsageError("compute_only: the model's output holds no tensor to back-propagate")
        loss = tensor.float().mean()
    loss.backward()


def _split_batch(batch: Any) -> tuple[Any, Any]:
    if isinstance(batch, (list, tuple)) and len(batch) == 2:
        return batch[0], batch[1]
    return batch, None


def _device_of(model: Any) -> Any:
    for param in model.parameters():
        return param.device
    return None


def _to(value: Any, device: Any) -> Any:
    if device is None or value is None:
        return value
    if hasattr(value, "to") and hasattr(value, "device"):
        return value.to(device)
    if isinstance(value, dict):
        return {k: _to(v, device) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to(v, device) for v in value)
    return value


def _synchronizer(torch: Any, device: Any) -> Callable[[], None]:
    if device is not None and device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


def _fresh_iterator(loader: Any) -> Any:
    """A new iterator over ``loader``. A DataLoader with persistent workers hands out its one
    kept iterator (reset) from ``iter``: the job's own, whose workers closing it would end. It
    gets an iterator of its own instead, with workers of its own."""
    if getattr(loader, "persistent_workers", False) and hasattr(loader, "_get_iterator"):
        return loader._get_iterator()
    return iter(loader)


def _close(it: Any) -> None:
    shutdown = getattr(it, "_shutdown_workers", None)  # a DataLoader iterator's workers
    if callable(shutdown):
        shutdown()
