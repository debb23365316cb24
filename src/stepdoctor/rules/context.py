"""What a rule reads: the record, its summary and the steps after warm-up."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from stepdoctor.model import (
    Phase,
    RunRecord,
    Speedup,
    StepTiming,
    Summary,
    SystemSample,
    TraceSummary,
)
from stepdoctor.rules.summary import measured_steps, profiled_steps, summarize
from stepdoctor.rules.where import StackIndex

__all__ = ["UNSPLIT_SHARE", "RuleContext", "removal_speedup", "speedup_if_removed"]


#: The phases of a training step: a step with time in none of them was not split (the rest of
#: it is not "between steps").
TRAINING_PHASES = tuple(
    p.value
    for p in (
        Phase.DATA_WAIT,
        Phase.H2D,
        Phase.FORWARD,
        Phase.BACKWARD,
        Phase.OPTIMIZER,
        Phase.TRAIN_STEP,
    )
)
#: At or above this share of the time in what a fix removes, the run shows under 1% of other
#: work: too little to model the job without it from (1 / (1 - share) is 100x and more on the
#: rounding of the rest; a share of 1.0 is a step the run did not split into phases, where a
#: "1000x" was claimed, issue 37).
UNSPLIT_SHARE = 0.99


def speedup_if_removed(share: float) -> float:
    """Return the job's speed-up if a ``share`` (0-1) of its time disappeared: 1 / (1 - share),
    at most 1 / (1 - ``UNSPLIT_SHARE``) (100x)."""
    return 1.0 / (1.0 - min(max(share, 0.0), UNSPLIT_SHARE))


def removal_speedup(share: float, basis: str) -> Speedup:
    """The modelled speed-up of removing a ``share`` of the job's time (``basis``: how), or no
    figure where the share leaves too little other work to model from (``UNSPLIT_SHARE``), the
    basis saying so."""
    if share >= UNSPLIT_SHARE:
        return Speedup.none(
            f"not modelled: {share:.1%} of the time is in what the fix removes, and the run "
            "shows too little other work to tell how long the job would take without it; only "
            "timing the job with the fix can tell"
        )
    return Speedup(factor=speedup_if_removed(share), basis=basis)


@dataclass(frozen=True)
class RuleContext:
    """A read-only view of one run (and/or its profiler traces) for the rules."""

    record: RunRecord
    trace: TraceSummary | None = None
    """Profiler-trace analysis, for the trace rules (``stepdoctor trace``)."""
    checkup: bool = False
    """The record is ``stepdoctor doctor``'s look at the machine: no job ran, so nothing is
    known of what a job would gain (the rules give no speed-up figure from it)."""

    @cached_property
    def summary(self) -> Summary:
        """Headline numbers (warm-up excluded)."""
        return summarize(self.record, self.profiled_steps)

    @cached_property
    def steps(self) -> tuple[StepTiming, ...]:
        """Steps after warm-up, less those stepdoctor's own profiler slowed (``--trace``)."""
        return measured_steps(self.record.steps, self.summary.warmup_steps, self.profiled_steps)

    @cached_property
    def steps_split(self) -> bool:
        """Whether any measured step had time in a phase of training (``TRAINING_PHASES``):
        a loop marked only by ``doc.step()``, or a framework whose calls the hooks do not see,
        is not split, whatever else it times (a checkpoint, an evaluation)."""
        return any(s.phase_ns.get(name, 0) > 0 for s in self.steps for name in TRAINING_PHASES)

    @cached_property
    def profiled_steps(self) -> frozenset[int]:
        """Indexes of the steps stepdoctor's own torch.profiler capture ran over."""
        return profiled_steps(self.record)

    @cached_property
    def system(self) -> tuple[SystemSample, ...]:
        """System samples taken during the steps after warm-up (all of them if no steps), less
        those taken while stepdoctor's own torch.profiler capture ran."""
        # torch.profiler's capture changes the job's CPU and memory use; the allocation
        # window's tracemalloc holds a few MiB at most while it runs, and leaving its samples
        # out would leave a short job's memory series too thin to judge
        own = [(p.start_ns, p.end_ns) for p in self.record.profiled if p.what != "tracemalloc"]
        kept = tuple(s for s in self.record.system if not any(a <= s.t_ns <= b for a, b in own))
        if not self.steps:
            return kept or self.record.system
        # none when no sample fell in the steps' span: the samples before it are the job's
        # start-up (imports, loading, a process group's set-up), not its training (a 2-rank
        # DDP job of 0.1 s of steps had its 2 s start-up's RSS rise called a leak)
        start, end = self.steps[0].start_ns, self.steps[-1].end_ns
        return tuple(s for s in kept if start <= s.t_ns <= end)

    @cached_property
    def span_ns(self) -> tuple[int, int] | None:
        """From the first measured step's start to the run's last step's end (None: no
        steps): the warm-up left out, but not stepdoctor's own captures, whose stacks are the
        job's too (a short job's allocation window may hold most of its measured steps)."""
        if not self.steps:
            return None
        return self.steps[0].start_ns, max(self.steps[-1].end_ns, self.record.steps[-1].end_ns)

    @cached_property
    def stack_index(self) -> StackIndex:
        """The record's sampled frames and stacks by id."""
        return StackIndex.of(self.record)

    def share(self, *phases: Phase | str) -> float:
        """Return the share (0-1) of measured step time spent in ``phases``."""
        return sum(self.summary.phase_share.get(str(p), 0.0) for p in phases)

    @cached_property
    def cores(self) -> int:
        """Cores the job may use (its CPU affinity)."""
        value = self.record.env_value("cpu.affinity")
        if isinstance(value, int) and value > 0:
            return value
        return self.record.meta.affinity_cores or self.record.meta.cpu_count or 1
