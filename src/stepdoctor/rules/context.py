"""What a rule reads: the record, its summary and the steps after warm-up."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from stepdoctor.model import Phase, RunRecord, StepTiming, Summary, SystemSample, TraceSummary
from stepdoctor.rules.summary import measured_steps, profiled_steps, summarize
from stepdoctor.rules.where import StackIndex

__all__ = ["RuleContext", "speedup_if_removed"]


def speedup_if_removed(share: float) -> float:
    """Return the job's speed-up if a ``share`` (0-1) of its time disappeared: 1 / (1 - share)."""
    return 1.0 / max(1e-9, 1.0 - min(share, 0.999))


@dataclass(frozen=True)
class RuleContext:
    """A read-only view of one run (and/or its profiler traces) for the rules."""

    record: RunRecord
    trace: TraceSummary | None = None
    """Profiler-trace analysis, for the trace rules (``stepdoctor trace``)."""

    @cached_property
    def summary(self) -> Summary:
        """Headline numbers (warm-up excluded)."""
        return summarize(self.record, self.profiled_steps)

    @cached_property
    def steps(self) -> tuple[StepTiming, ...]:
        """Steps after warm-up, less those stepdoctor's own profiler slowed (``--trace``)."""
        return measured_steps(self.record.steps, self.summary.warmup_steps, self.profiled_steps)

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
