"""What experiments measure: throughputs of the job's own parts, and the verdict they give."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

__all__ = ["BoundVerdict", "FixTrial", "Throughput", "TuneResult", "TuneTrial"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Throughput:
    """One timed experiment: how fast a part of the job runs on its own."""

    name: str
    """``data-only`` (the DataLoader alone) or ``compute-only`` (forward + backward alone)."""
    batches: int
    samples: int | None
    seconds: float
    warmup_batches: int = 0
    """Batches run before timing (worker start-up, first-call allocation), not counted."""
    stopped_by_budget: bool = False
    note: str = ""

    @property
    def batches_per_sec(self) -> float:
        """Batches a second (0 when nothing was timed)."""
        return self.batches / self.seconds if self.seconds > 0 else 0.0

    @property
    def samples_per_sec(self) -> float | None:
        """Samples a second, when batch sizes were known."""
        if self.samples is None or self.seconds <= 0:
            return None
        return self.samples / self.seconds


@dataclass(frozen=True, slots=True, kw_only=True)
class BoundVerdict:
    """Input-bound or compute-bound, from a data-only and a compute-only measurement."""

    data: Throughput
    compute: Throughput
    bound: str
    """``input``, ``compute`` or ``balanced`` (within the margin of each other)."""
    ceiling_per_sec: float
    """The slower of the two (samples/s when known for both, else batches/s): what the job
    could reach if nothing else cost time."""
    unit: str
    """``samples/s`` or ``batches/s``."""
    achieved_per_sec: float | None = None
    """What the job reached in its own steps, in the same unit, when known."""
    margin: float = 0.0

    @property
    def data_rate(self) -> float:
        """The data-only throughput in ``unit``."""
        return _rate(self.data, self.unit)

    @property
    def compute_rate(self) -> float:
        """The compute-only throughput in ``unit``."""
        return _rate(self.compute, self.unit)


def _rate(t: Throughput, unit: str) -> float:
    rate = t.samples_per_sec if unit == "samples/s" else t.batches_per_sec
    return rate or 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class TuneTrial:
    """One configuration ``stepdoctor tune`` ran: one change from the job's own settings."""

    change: str
    """What was changed (``num_workers``, ``pin_memory``, ``threads``, ``batch_size``...), or
    ``baseline``."""
    value: str
    """The value it was set to (``4``, ``x2``...)."""
    samples_per_sec: tuple[float, ...] = ()
    """One throughput per repeat (warm-up excluded), batches/s when samples are unknown."""
    peak_rss_bytes: int | None = None
    failed: str = ""
    """Why a run of this configuration failed (out of memory, an invalid setting...)."""

    @property
    def median(self) -> float | None:
        """The median throughput over the repeats."""
        return _median(self.samples_per_sec)


@dataclass(frozen=True, slots=True, kw_only=True)
class TuneResult:
    """What ``stepdoctor tune`` measured and recommends."""

    script: str
    steps: int
    repeats: int
    unit: str
    baseline: TuneTrial
    trials: tuple[TuneTrial, ...]
    best: TuneTrial | None
    """The fastest trial, when it beat the baseline beyond noise (see ``reason``)."""
    speedup: float | None
    """best median / baseline median, measured."""
    reason: str
    """Why ``best`` was accepted or why none was."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FixTrial:
    """One fix ``stepdoctor run --verify`` tried with the job's own objects after it ended."""

    rule: str
    """The finding whose fix it is."""
    change: str
    """What was changed, in the job's terms (``batch size x4 (128)``, ``float32 batches``)."""
    factors: tuple[float, ...] = ()
    """The whole job's speed-up in each round (as is / changed, interleaved)."""
    basis: str = ""
    """What was timed, and how a round's ratio became the job's speed-up."""
    note: str = ""

    @property
    def median(self) -> float | None:
        """The median speed-up over the rounds."""
        return _median(self.factors)


def _median(values: tuple[float, ...]) -> float | None:
    """The median of ``values``; None when there are none."""
    return statistics.median(values) if values else None
