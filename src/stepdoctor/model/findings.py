"""What the analysis produces: findings, their evidence, estimated speed-ups and fixes."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stepdoctor.model._strenum import StrEnum
from stepdoctor.model.experiments import BoundVerdict, FixTrial
from stepdoctor.model.run import EnvFact, RunMeta
from stepdoctor.model.stacks import AllocationSite, CodeFrame, CodeSite, CodeStack, StackCount

__all__ = [
    "Check",
    "Checkup",
    "Evidence",
    "Finding",
    "Fix",
    "Report",
    "Severity",
    "SkippedRule",
    "Speedup",
    "SpeedupKind",
    "Summary",
]


class Severity(StrEnum):
    """How much a finding matters."""

    CRITICAL = "critical"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        """Return 0 for the most severe."""
        return ("critical", "warning", "info").index(self.value)


@dataclass(frozen=True, slots=True, kw_only=True)
class Evidence:
    """One measured number behind a finding."""

    metric: str
    value: float | int | str | None
    unit: str = ""
    threshold: float | int | None = None
    source: str = ""


class SpeedupKind(StrEnum):
    """Where a speed-up figure comes from."""

    MEASURED = "measured"
    """Timed: the job's own steps with the cause at work against without it, or an experiment
    that ran the fix (``run --experiments`` / ``--verify``, ``tune``)."""
    MODELLED = "modelled"
    """Computed from the run's shares and the machine's capacity: an upper bound."""
    NONE = "none"
    """Not estimated (factor 1): the fix prevents a failure, or its gain depends on what the
    run cannot show."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Speedup:
    """The whole job's speed-up if the finding is fixed: wall time before / after."""

    factor: float
    basis: str
    """How the figure was made, in words: the formula and its inputs, or what was timed."""
    kind: SpeedupKind = SpeedupKind.MODELLED
    spread: tuple[float, float] | None = None
    """A measured figure's lowest and highest repeat (None for one repeat or a model)."""

    @classmethod
    def none(cls, basis: str) -> Speedup:
        """No figure (factor 1): ``basis`` says why."""
        return cls(factor=1.0, basis=basis, kind=SpeedupKind.NONE)

    @classmethod
    def measured(
        cls, factor: float, basis: str, spread: tuple[float, float] | None = None
    ) -> Speedup:
        """A figure timed on the job."""
        return cls(factor=factor, basis=basis, kind=SpeedupKind.MEASURED, spread=spread)


@dataclass(frozen=True, slots=True, kw_only=True)
class Fix:
    """What to change."""

    summary: str
    snippet: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """One diagnosis."""

    rule: str
    severity: Severity
    title: str
    explanation: str
    evidence: tuple[Evidence, ...]
    speedup: Speedup
    """The figure the report stands by: measured where something measured it, else the
    rule's model (``speedup.kind`` says which)."""
    fix: Fix
    modelled: Speedup | None = None
    """The rule's model, kept when a measurement replaced it as ``speedup``."""
    ranks: tuple[int, ...] = ()
    """The trace ranks the finding is about (trace rules); empty for a run's own findings."""
    span_ns: tuple[int, int] | None = None
    """The part of the run the finding is about (record clock), where it is narrower than the
    whole run: marked on the report's timelines."""
    where: tuple[CodeSite, ...] = ()
    """Where in the code the time the finding is about goes (sampled stacks of its phases)."""
    allocated_at: tuple[AllocationSite, ...] = ()
    """The lines whose objects the finding is about (GC pressure, memory growth)."""

    def measured_as(self, speedup: Speedup, **changes: Any) -> Finding:
        """This finding with ``speedup`` (a measurement) as its figure, the rule's model kept in
        ``modelled``, and any other ``changes``."""
        return dataclasses.replace(
            self, speedup=speedup, modelled=self.modelled or self.speedup, **changes
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class SkippedRule:
    """A rule that could not run, and why."""

    rule: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Summary:
    """Headline numbers of a run, warm-up excluded where it says so."""

    steps: int
    warmup_steps: int
    wall_s: float
    measured_s: float
    """Seconds covered by the steps after warm-up."""
    samples: int | None
    samples_per_sec: float | None
    batches_per_sec: float | None
    mean_step_ms: float | None
    phase_share: Mapping[str, float] = field(default_factory=dict)
    gc_share: float = 0.0
    warmup_note: str = ""
    profiled_note: str = ""
    """Which steps stepdoctor's own profiler capture slowed (``run --trace``), if any."""
    monitor_cpu_share: float | None = None
    """CPU time of stepdoctor's monitor thread over the run's wall time (its own cost)."""
    kind: str = ""
    """``training`` or ``inference`` (no backward pass seen); empty with no steps."""
    batch_note: str = ""
    """Where the batch size behind ``samples`` came from when no DataLoader batch was seen
    (the model's input), else empty."""
    timing_note: str = ""
    """On a GPU job: that its step times are the host's (the GPU runs behind it), else empty."""
    step_basis: str = ""
    """How the steps were found, in words (``model.measured.step_basis``)."""
    micro_batches_per_step: float | None = None
    """Median backward passes per step outside the optimizer (above 1: accumulation)."""
    closure_passes_per_step: float | None = None
    """Median backward passes inside the optimizer's step (a closure optimizer, LBFGS)."""
    evaluation_s: float = 0.0
    """Seconds of evaluation between training steps (all steps, warm-up included)."""
    evaluation_share: float = 0.0
    """Evaluation's share of the steps' wall time (training and evaluation together)."""
    evaluation_calls: int = 0
    """Calls of the trained model without autograd: evaluation batches."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    """The whole diagnosis of one run: what renderers format."""

    schema_version: int
    meta: RunMeta
    summary: Summary
    findings: tuple[Finding, ...]
    skipped: tuple[SkippedRule, ...] = ()
    warnings: tuple[str, ...] = ()
    end_status: str | None = None
    """``RunEnd.status``; None when the record has no end (the job was killed, or still runs)."""
    exit_code: int | None = None
    experiments: tuple[BoundVerdict, ...] = ()
    """Measured data-only / compute-only throughputs and their verdict, when run."""
    failed: bool = False
    """The job did not end normally: an exception, a non-zero exit code, Ctrl-C, or no end in
    the record (killed). Its findings are then about the part of the job that ran."""
    outcome: str = ""
    """When ``failed``: how the job ended and what the findings cover, said first by every
    renderer (empty otherwise)."""
    error: str = ""
    """The exception's type and message, when one ended the job."""
    error_at: str = ""
    """``path:line`` in the job's own code where it ended (see ``RunEnd.error_at``)."""
    evidence_note: str = ""
    """When the job measured too few steps or seconds to grade anything critical: how thin the
    evidence is (empty otherwise)."""
    fix_trials: tuple[FixTrial, ...] = ()
    """The fixes ``run --verify`` tried after the job, and what each gave."""
    measure_with: str = ""
    """When a finding worth acting on has a modelled figure: the command that measures it."""
    frames: tuple[CodeFrame, ...] = ()
    """The functions of ``stack_counts``' stacks."""
    stacks: tuple[CodeStack, ...] = ()
    stack_counts: tuple[StackCount, ...] = ()
    """Sampled stacks per phase, the whole run (the flame graphs)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Check:
    """One row of ``stepdoctor doctor``: a rule and how it came out."""

    rule: str
    title: str
    status: str
    """``ok``, ``info``, ``warning``, ``critical`` (the worst of its findings) or ``skipped``."""
    reason: str = ""
    """Why it was skipped."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Checkup:
    """The environment doctor's answer: facts, one check per environment rule, findings."""

    schema_version: int
    meta: RunMeta
    facts: tuple[EnvFact, ...]
    checks: tuple[Check, ...]
    findings: tuple[Finding, ...]
    duration_s: float

    @property
    def worst(self) -> Severity | None:
        """The most severe finding's severity (None when nothing was found)."""
        return min((f.severity for f in self.findings), key=lambda s: s.rank, default=None)
