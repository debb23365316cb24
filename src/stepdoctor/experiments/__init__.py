"""Measured what-ifs with the job's own objects: data-only and compute-only throughput, and
the verdict they give (input-bound or compute-bound, and the ceiling).

torch is imported lazily. Every experiment leaves the objects it touched as it found them
(weights, buffers, gradients, train/eval mode, RNG state): a job that runs them ends with the
same weights as one that does not.
"""

from __future__ import annotations

from stepdoctor.experiments.during_run import DEFAULT_BUDGET_S, make_run_experiment
from stepdoctor.experiments.throughput import (
    BOUND_MARGIN,
    compute_only,
    data_only,
    verdict,
)
from stepdoctor.experiments.tune import sweep, tune
from stepdoctor.model import BoundVerdict, Throughput, TuneResult, TuneTrial

__all__ = [
    "BOUND_MARGIN",
    "DEFAULT_BUDGET_S",
    "BoundVerdict",
    "Throughput",
    "TuneResult",
    "TuneTrial",
    "compute_only",
    "data_only",
    "make_run_experiment",
    "sweep",
    "tune",
    "verdict",
]
