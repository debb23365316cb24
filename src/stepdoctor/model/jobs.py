"""A distributed job's ranks as rows: what the job's diagnosis (``stepdoctor.jobs``) reads of
each rank's record and report, and what its table shows."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from stepdoctor.model.run import Collective, DdpStats

__all__ = ["RankRow"]


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
