"""What a JVM's garbage-collection log and a DL4J training log say, as read by ``logs/``.

The GC figures follow GCViewer's definitions (chewiebug/GCViewer ``GCModel``), which its own
tests pin down on sample logs: a pause is a stop-the-world event (young, mixed, full, CMS
initial mark and remark, G1 remark and cleanup, Shenandoah's init/final pauses), plus the time
threads were stopped at a safepoint beyond the GC pauses before it (``Total time for which
application threads were stopped``, ``[safepoint]``); concurrent phases are not pauses. The run
lasts from the first event's timestamp to the last one's, plus the last pause; throughput is
the share of it outside pauses. Where GCViewer is plainly wrong we are not (docs/logs.md):
ZGC's pauses count one by one (GCViewer: a cycle's three as one); a ZGC allocation stall stops
one thread, not the world, and is no pause; a full collection that runs inside a failed young
one (Serial) is one pause, not two; a stop holds every GC pause since the stop before it, not
only the last; ZGC logged with ``-Xlog:gc`` alone gives no pause times, and none are made up.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "Dl4jIteration",
    "Dl4jLog",
    "GcCause",
    "GcPause",
    "GcProblem",
    "JvmGcLog",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class GcPause:
    """One stop-the-world pause."""

    t_s: float
    """When, in seconds of the JVM's uptime as logged (JDK 8: the start of the event;
    unified logging: its end, as the line is written then); from the first event's date where
    the log has dates only."""
    pause_s: float
    kind: str
    """``young``, ``mixed``, ``full``, ``remark``, ``cleanup``, ``initial-mark``,
    ``concurrent-pause`` (Shenandoah's and ZGC's short pauses), ``degenerated`` (Shenandoah
    finishing a cycle stop-the-world: no full collection unless it is upgraded to one, logged
    as ``Pause Full``) or ``safepoint``."""
    cause: str = ""
    heap_before_bytes: int | None = None
    heap_after_bytes: int | None = None
    heap_total_bytes: int | None = None
    unix_s: float | None = None
    """Its wall-clock time where the log has dates."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GcCause:
    """The pauses of one kind and cause: ``Full GC (System.gc())`` is kind ``full``, cause
    ``System.gc()``."""

    kind: str
    cause: str
    count: int
    total_s: float
    max_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class GcProblem:
    """A collector's failure or warning sign, counted: ``to-space exhausted``,
    ``evacuation failure``, ``promotion failed``, ``concurrent mode failure``,
    ``humongous allocation``, ``metaspace``, ``allocation stall``."""

    name: str
    count: int
    first_t_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class JvmGcLog:
    """One GC log, summed up as it streamed past; the pauses themselves are kept up to
    ``logs.gc_stats.KEPT_PAUSES`` (then every ``pause_stride``-th, and the longest always)."""

    source: str
    format: str
    """``jdk8`` (``-XX:+PrintGCDetails`` and older) or ``unified`` (``-Xlog:gc``)."""
    collector: str
    """``G1``, ``Parallel``, ``Serial``, ``CMS``, ``ZGC``, ``Shenandoah`` or ``""``."""
    pauses: int
    total_pause_s: float
    max_pause_s: float
    full_gcs: int
    full_pause_s: float
    duration_s: float
    first_t_s: float | None
    last_t_s: float | None
    started_unix_s: float | None = None
    """The wall-clock time of the first event, where the log has dates."""
    safepoint_pauses: int = 0
    """Of ``pauses``, the safepoint stops beyond the GC pause before them."""
    safepoint_s: float = 0.0
    concurrent_s: float = 0.0
    """Time in concurrent phases (not pauses), where the log gives it."""
    causes: tuple[GcCause, ...] = ()
    problems: tuple[GcProblem, ...] = ()
    timeline: tuple[GcPause, ...] = ()
    pause_stride: int = 1
    longest: tuple[GcPause, ...] = ()
    heap_max_bytes: int | None = None
    """The largest heap size among the pauses kept (``timeline``)."""
    metaspace_after_bytes: int | None = None
    metaspace_total_bytes: int | None = None
    lines: int = 0
    unparsed: int = 0
    """Lines that looked like events of this log but could not be read."""
    unparsed_samples: tuple[str, ...] = ()
    pause_times_known: bool = True
    """False where the log names collections but not their pauses (ZGC with ``-Xlog:gc``)."""
    utc_offset_s: float | None = None
    """The UTC offset its dates were written in (where it has dates)."""

    @property
    def mean_pause_s(self) -> float:
        return self.total_pause_s / self.pauses if self.pauses else 0.0

    @property
    def throughput_pct(self) -> float | None:
        """The share of the run outside pauses (GCViewer's throughput), in percent; None
        when the log spans no time."""
        if self.duration_s <= 0:
            return None
        return 100.0 * (self.duration_s - self.total_pause_s) / self.duration_s


@dataclass(frozen=True, slots=True, kw_only=True)
class Dl4jIteration:
    """One PerformanceListener line: the iteration it reports, the wall time since the
    listener's previous call (one iteration, ETL included), and the ETL time."""

    iteration: int
    time_ms: float
    etl_ms: float | None = None
    samples_per_s: float | None = None
    batches_per_s: float | None = None
    score: float | None = None
    gc_ms: float | None = None
    """The collectors' time since the previous report (``reportGC``), summed."""
    gc_count: int | None = None
    device: int | None = None
    unix_s: float | None = None
    """The line's wall-clock time, where the logger wrote a date and a time: its local time
    read as if it were UTC (a logger writes no offset)."""
    day_s: float | None = None
    """Seconds since midnight, where the logger wrote a time of day only."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Dl4jLog:
    """A DL4J training log: its PerformanceListener iterations, scores and ND4J's start-up
    facts (backend, BLAS, threads, cuDNN, workspaces, periodic GC)."""

    source: str
    iterations: tuple[Dl4jIteration, ...] = ()
    scores: tuple[tuple[int, float], ...] = ()
    facts: tuple[tuple[str, str], ...] = ()
    lines: int = 0
    unparsed: int = 0
    unparsed_samples: tuple[str, ...] = ()
