"""Measured what-ifs with the job's own objects: data-only and compute-only throughput, and
the verdict they give (input-bound or compute-bound, and the ceiling).

torch is imported lazily. Every experiment leaves the objects it touched as it found them
(weights, buffers, gradients, train/eval mode, RNG state): a job that runs them ends with the
same weights as one that does not.

The names below load on first use (PEP 562): ``stepdoctor run`` reads the defaults in
``budgets`` before the job starts, and needs the experiments only when asked for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stepdoctor._lazy import lazy_names
from stepdoctor.experiments.budgets import DEFAULT_BUDGET_S

if TYPE_CHECKING:
    from stepdoctor.experiments.during_run import make_run_experiment
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

_HOMES = {
    "BOUND_MARGIN": "stepdoctor.experiments.throughput",
    "BoundVerdict": "stepdoctor.model",
    "Throughput": "stepdoctor.model",
    "TuneResult": "stepdoctor.model",
    "TuneTrial": "stepdoctor.model",
    "compute_only": "stepdoctor.experiments.throughput",
    "data_only": "stepdoctor.experiments.throughput",
    "make_run_experiment": "stepdoctor.experiments.during_run",
    "sweep": "stepdoctor.experiments.tune",
    "tune": "stepdoctor.experiments.tune",
    "verdict": "stepdoctor.experiments.throughput",
}


__getattr__ = lazy_names("stepdoctor.experiments", _HOMES, globals())
