"""A distributed job's ranks as rows (what the job's diagnosis, ``stepdoctor.jobs``, reads of
each rank's record and report, and what its table shows) and the job's report."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

from stepdoctor.model.findings import Finding, Report
from stepdoctor.model.run import Collective, DdpStats

__all__ = ["STRAGGLER_CAUSE", "STRAGGLER_LOST", "JobReport", "RankFinding", "RankRow"]

#: The straggler finding's evidence that a job's JSON reads (``jobs.stragglers`` writes it):
#: its cause (a phase of its step, ``gpu_clock`` or ``cpu_clock``, or "none stands out") and
#: the share of the other ranks' step lost waiting for it.
STRAGGLER_CAUSE = "cause"
STRAGGLER_LOST = "other ranks' step lost waiting"


@dataclass(frozen=True, slots=True)
class RankRow:
    """One rank's line of the job's table."""

    rank: int
    host: str
    steps: int
    mean_step_ms: float | None
    samples_per_sec: float | None
    data_wait_share: float | None
    comm_ms: float | None
    """DDP's all-reduce time per sampled iteration (waiting for the other ranks included)."""
    phase_ms: Mapping[str, float] = field(default_factory=dict)
    """Time a step in each phase (``backward_compute`` from DDP; ``gc`` its pauses)."""
    completed: int = 0
    """Steps the rank completed (warm-up included)."""
    others_cpu_share: float | None = None
    """The share of its host's CPUs processes outside the job used during its steps."""
    status: str | None = None
    """How the rank's run ended (``RunEnd.status``); None: its record has no end (stopped)."""
    error: str = ""
    last_phase: str = ""
    """The phase most of its loop's last stack samples were in (``HANG_SAMPLES``)."""
    last_where: str = ""
    """Where its loop's last sample was: the innermost frame of its own code, and the call."""
    last_stack: str = ""
    """Its last sample's innermost frames, outermost first."""
    ddp: DdpStats | None = None
    """Its first DDP model's own timings and settings."""
    micro_batches: float | None = None
    """Backward passes a step (above 1: gradient accumulation)."""
    cpu_mhz: float | None = None
    """Its host's CPUs' median clock during its steps."""
    gpu_clock: float | None = None
    """Its GPU's median SM clock during its steps, as a share of the GPU's maximum."""
    gpu_throttled: tuple[str, ...] = ()
    """Why its GPU's clock was held down (power, heat) in at least half its readings."""
    busiest_others: str = ""
    """The processes outside the job that used the most CPU on its host during its steps."""
    collectives: tuple[Collective, ...] = ()
    """Its last collectives (flight recorder), as read last."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RankFinding:
    """A finding of the ranks' own reports, labelled with the ranks that made it."""

    ranks: tuple[int, ...]
    every: bool
    """Every rank read made it."""
    figures_of: int
    """The rank whose finding (and figures) this is: of several, the one whose fix saves the
    most."""
    finding: Finding

    @property
    def label(self) -> str:
        """``every rank (rank 2's figures)``, ``rank 1`` or ``ranks 0, 2 (rank 0's figures)``."""
        if len(self.ranks) == 1:
            return f"rank {self.ranks[0]}"
        who = "every rank" if self.every else "ranks " + ", ".join(str(r) for r in self.ranks)
        return f"{who} (rank {self.figures_of}'s figures)"

    def labelled(self) -> Finding:
        """The finding with its label before its title (``every rank: ...``)."""
        return dataclasses.replace(self.finding, title=f"{self.label}: {self.finding.title}")


@dataclass(frozen=True, slots=True, kw_only=True)
class JobReport:
    """A distributed job's report: its verdict from all ranks together, its ranks' table,
    then each rank's own report (``stepdoctor.jobs.job_report``)."""

    schema_version: int
    folder: str
    """The job's folder (a ``rank-N`` folder per rank)."""
    world_size: int | None
    """The ranks the job was launched with (their records' ``world_size``)."""
    rows: tuple[RankRow, ...]
    findings: tuple[Finding, ...]
    """The job's own verdict, ranked: a hang or desync, else the straggler and the
    communication's exposed cost."""
    rank_findings: tuple[RankFinding, ...]
    """The ranks' own findings, ranked, each labelled by the ranks that made it (said once
    where several ranks make it)."""
    ranks: tuple[Report, ...]
    """Each rank's report, in rank order (the ranks whose records could be read)."""
    problems: tuple[str, ...] = ()
    """A line for each rank whose record could not be read."""
