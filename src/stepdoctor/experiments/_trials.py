"""The fixes ``run --verify`` tries (``stepdoctor.experiments.verify``): each trial times the
part of the step a fix changes, as the job ran it and changed, and turns each round's ratio into
the whole job's speed-up with the job's own phase times (``JobStep``)."""

from __future__ import annotations

import copy
import math
import os
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from stepdoctor.collect.hooks.trigger import ExperimentObjects
from stepdoctor.experiments.throughput import compute_only, data_only
from stepdoctor.model import Finding, FixTrial, Phase, Report

__all__ = ["MAX_BATCH_SCALE", "TARGET_BATCH", "TRIAL", "JobStep"]

#: The largest batch tried, as a multiple of the job's.
MAX_BATCH_SCALE = 64
#: The batch small-batch's fix suggests (its snippet), tried with x2, x4, x8 when larger.
TARGET_BATCH = 64


class JobStep:
    """The job's own step, in seconds, from its report: what a trial's ratio scales."""

    def __init__(self, step_s: float, shares: dict[str, float]) -> None:
        self.step_s = step_s
        self.compute_s = step_s * (shares.get(Phase.FORWARD, 0.0) + shares.get(Phase.BACKWARD, 0.0))
        self.data_s = step_s * shares.get(Phase.DATA_WAIT, 0.0)

    @classmethod
    def of(cls, report: Report) -> JobStep | None:
        s = report.summary
        if not s.mean_step_ms or not s.phase_share:
            return None
        return cls(s.mean_step_ms / 1000, dict(s.phase_share))

    def with_compute(self, ratio: float) -> float:
        """The job's speed-up with forward + backward ``ratio`` times as long."""
        new = self.step_s - self.compute_s + self.compute_s * ratio
        return self.step_s / new if new > 0 else 1.0

    def with_data(self, ratio: float, *, overlapped: bool = False) -> float:
        """The job's speed-up with the data wait ``ratio`` times as long (``overlapped``: the
        batches come from workers while the model computes, so only what exceeds the rest of
        the step is waited for)."""
        rest = self.step_s - self.data_s
        data = self.data_s * ratio
        new = max(rest, data) if overlapped else rest + data
        return self.step_s / new if new > 0 else 1.0

    def with_batch(self, scale: int, compute_ratio: float, data_per_sample: float = 1.0) -> float:
        """The job's speed-up in samples/s with batches ``scale`` times larger: forward +
        backward ``compute_ratio`` times as long a step, the data wait ``data_per_sample``
        times as long per sample (1: unchanged), the other per-step costs spread over
        ``scale`` times the samples."""
        fixed = self.step_s - self.compute_s - self.data_s
        per_sample_now = self.step_s
        per_sample_new = (
            fixed + self.compute_s * compute_ratio
        ) / scale + self.data_s * data_per_sample
        return per_sample_now / per_sample_new if per_sample_new > 0 else 1.0


def _rounds(
    baseline: Callable[[float], float],
    changed: Callable[[float], float],
    *,
    repeats: int,
    budget_s: float,
) -> list[float]:
    """``changed`` time over ``baseline`` time, one ratio per round, the order alternating;
    each call gets an equal share of ``budget_s``."""
    each = budget_s / (2 * repeats)
    ratios = []
    for i in range(repeats):
        if i % 2 == 0:
            a = baseline(each)
            b = changed(each)
        else:
            b = changed(each)
            a = baseline(each)
        if a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b):
            ratios.append(b / a)
    return ratios


def _compute_time(model: Any, batch: Any) -> Callable[[float], float]:
    """Seconds of one forward + backward of ``batch``, timed within a budget."""

    def timed(budget_s: float) -> float:
        import torch

        with torch.enable_grad():
            t = compute_only(model, batch, steps=50, warmup=1, budget_s=budget_s)
        return t.seconds / t.batches if t.batches else math.inf

    return timed


def _trial(
    rule: str, change: str, factors: Sequence[float], basis: str, note: str = ""
) -> FixTrial:
    return FixTrial(
        rule=rule,
        change=change,
        factors=tuple(round(f, 4) for f in factors),
        basis=basis,
        note=note,
    )


def _batch_trial(
    objects: ExperimentObjects, finding: Finding, job: JobStep, budget_s: float, repeats: int
) -> tuple[list[FixTrial], list[str]]:
    batch = objects.batch
    size = _leading(batch)
    if size is None:
        return [], ["small-batch: the batch has no leading dimension to scale"]
    scales = sorted(
        {s for s in (2, 4, 8, math.ceil(TARGET_BATCH / size)) if 1 < s <= MAX_BATCH_SCALE}
    )
    base = _compute_time(objects.model, batch)
    loader = objects.loader
    data_base = _data_time(loader) if _resizable(loader) else None
    out = []
    share = budget_s / len(scales) / (2 if data_base is not None else 1)
    for scale in scales:
        big = _repeat(batch, scale)
        ratios = _rounds(base, _compute_time(objects.model, big), repeats=repeats,
                         budget_s=share)  # fmt: skip
        if not ratios:
            continue
        data = [1.0] * len(ratios)
        said = "the data per batch as measured, per sample unchanged"
        if data_base is not None:
            larger = _rounds(data_base, _data_time(_with_batch(loader, size * scale)),
                             repeats=repeats, budget_s=share)  # fmt: skip
            if len(larger) == len(ratios):
                data = [r / scale for r in larger]
                said = (
                    f"the loader alone at batch {size * scale} took "
                    f"{statistics.median(larger):.2f}x as long a batch"
                )
        out.append(
            _trial(
                "small-batch",
                f"batch size x{scale} ({size * scale})",
                [job.with_batch(scale, r, d) for r, d in zip(ratios, data, strict=True)],
                f"forward + backward of the batch repeated {scale} times took "
                f"{statistics.median(ratios):.2f}x as long as of the job's batch of {size}; "
                f"{said}; per-step costs spread over the larger batch",
            )
        )
    return out, []


def _resizable(loader: Any) -> bool:
    """Whether ``loader`` is a DataLoader whose batch size can be changed in a copy."""
    from torch.utils.data import DataLoader, IterableDataset

    return (
        isinstance(loader, DataLoader)
        and loader.batch_size is not None
        and not isinstance(loader.dataset, IterableDataset)
    )


def _with_batch(loader: Any, size: int) -> Any:
    """A copy of ``loader`` (same data set, sampler, collate, workers) with batches of ``size``."""
    from torch.utils.data import DataLoader

    return DataLoader(
        loader.dataset,
        batch_size=size,
        sampler=loader.sampler,
        collate_fn=loader.collate_fn,
        num_workers=loader.num_workers,
        drop_last=loader.drop_last,
    )


def _float32_trial(
    objects: ExperimentObjects, finding: Finding, job: JobStep, budget_s: float, repeats: int
) -> tuple[list[FixTrial], list[str]]:
    import torch

    model = objects.model
    weights = any(p.dtype == torch.float64 for p in model.parameters())
    # float64 weights: a float32 copy; float32 weights (only the batches are float64, cast
    # on the way in): the same model on the batch made float32.
    single = copy.deepcopy(model).float() if weights else model
    ratios = _rounds(
        _compute_time(model, objects.batch),
        _compute_time(single, _cast(objects.batch, torch.float64, torch.float32)),
        repeats=repeats,
        budget_s=budget_s,
    )
    if not ratios:
        return [], []
    what = "a float32 copy of the model on float32 data" if weights else "float32 batches"
    return [
        _trial(
            "float64",
            "float32 model and data" if weights else "float32 batches",
            [job.with_compute(r) for r in ratios],
            f"forward + backward with {what} took {statistics.median(ratios):.2f}x as long as "
            "as the job runs them; the rest of the step as measured",
        )
    ], []


def _threads_trial(
    objects: ExperimentObjects, finding: Finding, job: JobStep, budget_s: float, repeats: int
) -> tuple[list[FixTrial], list[str]]:
    import torch

    now = torch.get_num_threads()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    counts = [n for n in range(1, (cores or 1) + 1) if n != now]
    if not counts:
        return [], []
    timer = _compute_time(objects.model, objects.batch)

    def at(n: int) -> Callable[[float], float]:
        def timed(budget: float) -> float:
            torch.set_num_threads(n)
            try:
                return timer(budget)
            finally:
                torch.set_num_threads(now)

        return timed

    out = []
    for n in counts:
        ratios = _rounds(timer, at(n), repeats=repeats, budget_s=budget_s / len(counts))
        if ratios:
            out.append(
                _trial(
                    "thread-oversubscription",
                    f"torch.set_num_threads({n})",
                    [job.with_compute(r) for r in ratios],
                    f"forward + backward with {n} thread(s) took "
                    f"{statistics.median(ratios):.2f}x as long as with the job's {now}",
                )
            )
    return out, []


def _loader_trial(
    objects: ExperimentObjects, finding: Finding, job: JobStep, budget_s: float, repeats: int
) -> tuple[list[FixTrial], list[str]]:
    import torch

    loader = objects.loader
    if loader is None:
        return [], ["input-bound: the batches did not come from a DataLoader"]
    dataset = getattr(loader, "dataset", None)
    if isinstance(dataset, torch.utils.data.IterableDataset):
        return [], ["input-bound: an IterableDataset may not restart"]
    variants = _loader_variants(loader, finding)
    if not variants:
        return [], [
            "input-bound: no change of the loader to time here (the cure is in the data set's "
            "code: preparing each sample once)"
        ]
    base = _data_time(loader)
    out = []
    for change, other, overlapped, basis in variants:
        ratios = _rounds(base, _data_time(other), repeats=repeats,
                         budget_s=budget_s / len(variants))  # fmt: skip
        if ratios:
            out.append(
                _trial(
                    "input-bound",
                    change,
                    [job.with_data(r, overlapped=overlapped) for r in ratios],
                    f"{basis}: {statistics.median(ratios):.2f}x the time per batch of the job's "
                    "loader alone",
                )
            )
    return out, []


def _loader_variants(loader: Any, finding: Finding) -> list[tuple[str, Any, bool, str]]:
    """The loader changes worth timing for this finding: batched indexing when the wait is
    per-sample indexing, more workers when it waits on storage or a core is spare."""
    from torch.utils.data import BatchSampler, DataLoader, RandomSampler, SequentialSampler

    fix = finding.fix.summary
    out = []
    size = getattr(loader, "batch_size", None)
    dataset = loader.dataset
    if "BatchSampler" in fix and size:
        sampler_cls = (
            RandomSampler if isinstance(loader.sampler, RandomSampler) else SequentialSampler
        )
        batched = DataLoader(
            dataset,
            sampler=BatchSampler(sampler_cls(dataset), batch_size=size, drop_last=loader.drop_last),
            batch_size=None,
            collate_fn=None,
        )
        out.append(
            ("batched indexing", batched, False, "the data set indexed a whole batch at a time")
        )
    workers = int(getattr(loader, "num_workers", 0))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    waits_on_io = "storage or the network" in fix
    spare = "core(s) no thread of the job uses" in fix
    if (waits_on_io or spare) and size is not None:
        n = max(2, 2 * workers, min(8, 2 * (cores or 1))) if waits_on_io else workers + 1
        # Not persistent: each timed pass starts its workers (its warm-up batch waits for
        # them) and ends them, so none outlives the trial.
        more = DataLoader(
            dataset,
            batch_size=size,
            sampler=loader.sampler,
            collate_fn=loader.collate_fn,
            num_workers=n,
            prefetch_factor=4,
            drop_last=loader.drop_last,
        )
        out.append(
            (
                f"num_workers={n}, prefetch_factor=4",
                more,
                True,
                f"the loader alone with {n} workers (batches made while the model computes)",
            )
        )
    return out


def _data_time(loader: Any) -> Callable[[float], float]:
    """Seconds per batch of ``loader`` alone (a fresh pass), timed within a budget."""

    def timed(budget_s: float) -> float:
        t = data_only(loader, batches=200, warmup=1, budget_s=budget_s)
        return t.seconds / t.batches if t.batches else math.inf

    return timed


def _forward_time(
    model: Any, batch: Any, *, grad: bool, evaluate: bool
) -> Callable[[float], float]:
    """Seconds of one forward of ``batch`` (its inputs), autograd on or in inference mode,
    in the job's train/eval mode or in eval mode (put back afterwards)."""
    import torch

    from stepdoctor.experiments.throughput import _device_of, _synchronizer, _to

    inputs = batch[0] if isinstance(batch, (list, tuple)) and len(batch) == 2 else batch
    device = _device_of(model)
    inputs = _to(inputs, device)  # a loader's batch is on the host until the job moves it
    sync = _synchronizer(torch, device)

    def once() -> None:
        if isinstance(inputs, dict):
            model(**inputs)
        else:
            model(inputs)

    def timed(budget_s: float) -> float:
        modes = {m: m.training for m in model.modules()}
        rng = torch.get_rng_state()
        if evaluate:
            model.eval()
        try:
            context = torch.enable_grad() if grad else torch.inference_mode()
            with context:
                once()  # warm-up
                sync()
                count, start = 0, time.perf_counter()
                while count < 50:
                    once()
                    count += 1
                    if time.perf_counter() - start >= budget_s:
                        break
                sync()
                return (time.perf_counter() - start) / count
        finally:
            for module, training in modes.items():
                module.training = training
            torch.set_rng_state(rng)

    return timed


def _inference_trial(
    objects: ExperimentObjects, finding: Finding, job: JobStep, budget_s: float, repeats: int
) -> tuple[list[FixTrial], list[str]]:
    model, batch = objects.model, objects.batch
    ratios = _rounds(
        _forward_time(model, batch, grad=True, evaluate=False),
        _forward_time(model, batch, grad=False, evaluate=True),
        repeats=repeats,
        budget_s=budget_s,
    )
    if not ratios:
        return [], []
    return [
        _trial(
            "autograd-in-inference",
            "model.eval() and torch.inference_mode()",
            [job.with_compute(r) for r in ratios],
            f"the forward in eval mode under inference_mode took {statistics.median(ratios):.2f}x "
            "as long as with autograd on, in the job's mode",
        )
    ], []


def _together_trial(
    objects: ExperimentObjects, finding: Finding, job: JobStep, budget_s: float, repeats: int
) -> tuple[list[FixTrial], list[str]]:
    at_once = next(
        (int(e.value) for e in finding.evidence if e.metric == "most calls at once"
         and isinstance(e.value, int)),
        2,
    )  # fmt: skip
    model, batch = objects.model, objects.batch
    single = _forward_time(model, batch, grad=False, evaluate=False)
    joined = _forward_time(model, _repeat(batch, at_once), grad=False, evaluate=False)
    ratios = _rounds(
        lambda budget: single(budget) * at_once, joined, repeats=repeats, budget_s=budget_s
    )
    if not ratios:
        return [], []
    return [
        _trial(
            "shared-model-threads",
            f"{at_once} requests in one call",
            [job.with_compute(r) for r in ratios],
            f"one call of {at_once} requests together took {statistics.median(ratios):.2f}x as "
            f"long as {at_once} calls of one",
        )
    ], []


TRIAL: dict[
    str,
    Callable[[ExperimentObjects, Finding, JobStep, float, int], tuple[list[FixTrial], list[str]]],
] = {
    "small-batch": _batch_trial,
    "float64": _float32_trial,
    "thread-oversubscription": _threads_trial,
    "input-bound": _loader_trial,
    "autograd-in-inference": _inference_trial,
    "shared-model-threads": _together_trial,
}


def _leading(batch: Any) -> int | None:
    from stepdoctor.collect.hooks.batches import batch_size_of

    return batch_size_of(batch)


def _repeat(value: Any, times: int) -> Any:
    """``value`` (tensors, or tuples / lists / dicts of them) with its rows repeated."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.repeat(times, *([1] * (value.dim() - 1))) if value.dim() else value
    if isinstance(value, dict):
        return {k: _repeat(v, times) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_repeat(v, times) for v in value)
    return value


def _cast(value: Any, source: Any, target: Any) -> Any:
    """``value`` with its ``source``-dtype tensors cast to ``target``."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(target) if value.dtype == source else value
    if isinstance(value, dict):
        return {k: _cast(v, source, target) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, source, target) for v in value)
    return value
