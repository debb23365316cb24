"""Which of a run's steps are judged, and which of those are outliers: one definition.

The rules (``step-outliers``, every share in the summary) and the report's plots
(``stepdoctor.timeline``, drawn by ``render.html``) must agree on these, and the import-linter
layers in pyproject.toml keep the rules and the renderers from importing each other: the
definitions live here, below both, as ``WARMUP_SAMPLES`` does.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from stepdoctor.model.phases import Phase
from stepdoctor.model.run import RunRecord, StepTiming

__all__ = [
    "OUTLIER_SIGMAS",
    "OutlierCut",
    "measured_steps",
    "outlier_cut",
    "profiled_steps",
    "training_steps",
]

#: What ended a training step (``StepTiming.boundary``); ``model`` steps are calls of the
#: model in a job that was not (yet) seen to train.
TRAINING_BOUNDARIES = frozenset({"optimizer", "backward", "explicit"})


def training_steps(steps: tuple[StepTiming, ...]) -> tuple[StepTiming, ...]:
    """The steps that are the job's work: its training steps when it trained (calls of the
    model taken as inference before its first training step were evaluation), else all
    (an inference-only job's steps are its model calls)."""
    if not steps or steps[-1].boundary not in TRAINING_BOUNDARIES:
        return steps
    if steps[0].boundary in TRAINING_BOUNDARIES:
        return steps
    return tuple(s for s in steps if s.boundary in TRAINING_BOUNDARIES)


#: SageMaker Debugger's StepOutlier: a step is an outlier above mean + 3 standard deviations.
OUTLIER_SIGMAS = 3.0


def profiled_steps(record: RunRecord) -> frozenset[int]:
    """Indexes of the steps stepdoctor's own torch.profiler capture ran over (``run
    --trace``): the job's steps, slowed by the profiler."""
    spans = record.profiled
    if not spans:  # most runs: no pass over their (maybe millions of) steps
        return frozenset()
    return frozenset(
        s.index
        for s in record.steps
        if any(s.start_ns < span.end_ns and s.end_ns > span.start_ns for span in spans)
    )


def measured_steps(
    steps: tuple[StepTiming, ...], warm: int, profiled: frozenset[int]
) -> tuple[StepTiming, ...]:
    """The steps the figures and the rules judge: the ``training_steps`` after the ``warm``
    warm-up steps, less the ``profiled`` ones (``profiled_steps``: stepdoctor's own profiler
    slowed them, so they are not the job's)."""
    after = training_steps(steps)[warm:]
    return tuple(s for s in after if s.index not in profiled) if profiled else after


@dataclass(frozen=True, slots=True, kw_only=True)
class OutlierCut:
    """The outlier steps among a run's measured steps (``outlier_cut``)."""

    judged: tuple[StepTiming, ...]
    """The measured steps that saved no checkpoint (``checkpoint-stalls`` judges those)."""
    limit_ns: float | None
    """Mean + ``OUTLIER_SIGMAS`` population standard deviations of the judged steps'
    durations; None with fewer than two judged steps."""
    outliers: tuple[StepTiming, ...]
    """The judged steps longer than ``limit_ns``, in step order."""


def outlier_cut(measured: Sequence[StepTiming]) -> OutlierCut:
    """Find the outlier steps among ``measured`` (``measured_steps``), as step-outliers does.

    Steps that saved a checkpoint are left out of the cut and of the outliers; of the others, a
    step is an outlier when its duration is above their mean + 3σ.
    """
    judged = tuple(s for s in measured if not s.phase(Phase.CHECKPOINT))
    if len(judged) < 2:
        return OutlierCut(judged=judged, limit_ns=None, outliers=())
    durations = [s.duration_ns for s in judged]
    limit = statistics.fmean(durations) + OUTLIER_SIGMAS * statistics.pstdev(durations)
    return OutlierCut(
        judged=judged,
        limit_ns=limit,
        outliers=tuple(s for s in judged if s.duration_ns > limit),
    )
