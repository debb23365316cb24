"""The rules of a JVM job's logs, on real GC logs of the corpus (shared/logs): each sign
named where the log shows it, silence where it does not."""

from __future__ import annotations

from stepdoctor.logs import read_gc_log
from stepdoctor.logs.dl4j import parse_dl4j
from stepdoctor.logs.record import to_record
from stepdoctor.model import Finding, Severity
from stepdoctor.report import build_report
from tests.shared_data import LOGS, needs

GC = LOGS / "gc"
DL4J = LOGS / "dl4j"
pytestmark = needs(LOGS / "oracles.json")


def _findings(*names: str, dl4j: str | None = None) -> list[Finding]:
    logs = [read_gc_log(GC / name) for name in names]
    train = None
    if dl4j is not None:
        train = parse_dl4j(dl4j, (DL4J / dl4j).read_text().splitlines())
    return list(build_report(to_record(train, logs, ("t",))).findings)


def _rules(findings: list[Finding]) -> list[tuple[str, str]]:
    return [(f.rule, f.severity.value) for f in findings]


def test_a_g1_job_that_spends_half_its_time_in_pauses_is_critical() -> None:
    # GCViewer's own test asserts this log's throughput: 47.77%
    (top, *_) = _findings("gcviewer/SampleSun1_6_0G1_gc_verbose.txt")
    assert (top.rule, top.severity) == ("jvm-gc-overhead", Severity.CRITICAL)
    ev = {e.metric: e.value for e in top.evidence}
    assert ev["share of the log's span in pauses"] == round(1 - 0.477730602904, 4)
    assert top.speedup.factor > 2.0 and "upper bound" in top.speedup.basis
    assert top.fix is not None and "-Xmx" in top.fix.summary


def test_cms_concurrent_mode_failures_are_named_with_cmss_settings() -> None:
    findings = _findings("gcviewer/SampleSun1_5_0ConcurrentModeFailure.txt")
    failures = [f for f in findings if f.rule == "jvm-gc-failures"]
    (failure,) = failures
    assert failure.title.startswith("Concurrent mode failure: 149 time(s)")
    assert failure.fix is not None and "CMSInitiatingOccupancyFraction" in failure.fix.summary
    assert {"jvm-gc-overhead", "jvm-full-gcs", "jvm-long-pauses"} <= {f.rule for f in findings}


def test_g1s_to_space_exhausted_and_humongous_allocations() -> None:
    exhausted = _findings("gcviewer/sample-ujl-g1-gc-defaults.txt")
    assert ("jvm-gc-failures", "warning") in _rules(exhausted)
    (told,) = [f for f in exhausted if f.rule == "jvm-gc-failures"]
    assert "To-space exhausted: 3 time(s)" in told.title and "G1ReservePercent" in told.fix.summary  # type: ignore[union-attr]
    humongous = _findings("gcviewer/SampleSun1_8_0G1HumongousMixed.txt")
    assert _rules(humongous) == [("jvm-gc-failures", "info")]
    assert "G1HeapRegionSize" in humongous[0].fix.summary  # type: ignore[union-attr]


def test_a_log_of_few_collections_claims_no_share_of_time() -> None:
    """One young pause (GCViewer: throughput 0%): a log that spans no more than its pauses
    says nothing about the job's time in GC."""
    assert _findings("gcviewer/SampleSun1_8_0G1SystemGcYoung.txt") == []
    # but a pause of 6.7 s is long whatever the log's length
    (long,) = _findings("gcviewer/SampleSun1_5_0PromotionFailure.txt")[:1]
    assert long.rule == "jvm-long-pauses" and "6.7 s" in long.title


def test_healthy_logs_stay_silent() -> None:
    # Shenandoah's and ZGC's sub-millisecond pauses, a G1 job at 97.6% throughput
    for name in (
        "gcviewer/Sample-ujl-shenandoah-jdk17.txt",
        "garbagecat/dataset243.txt",
        "jifa/17G1Parser.log",
    ):
        loud = [f for f in _findings(name) if f.severity is not Severity.INFO]
        assert loud == [], name


def test_full_collections_the_program_calls_point_at_nd4js_periodic_gc() -> None:
    """A Parallel log whose full collections are System.gc() (GCViewer's PrintGCID sample)
    read beside a DL4J log whose ND4J calls System.gc() every 5 s with workspaces on."""
    findings = _findings(
        "gcviewer/SampleSun1_8_0ParallelPrintGCID.txt", dl4j="output_v100alpha_cuda91-cudnn_16.txt"
    )
    (full,) = [f for f in findings if f.rule == "jvm-full-gcs"]
    assert "System.gc()" in full.explanation
    assert full.fix is not None and "togglePeriodicGc(false)" in full.fix.summary
    assert "-XX:+DisableExplicitGC" in full.fix.summary
    # the DL4J log's own periodic-GC note says the GC log shows the cost
    (setup,) = [f for f in findings if f.rule == "dl4j-setup"]
    assert "GC log's full collections show what they cost" in setup.explanation


def test_zgcs_allocation_stalls_are_named_though_its_pauses_are_short() -> None:
    """ZGC's three pauses took 0.025 ms; 14 threads stood still up to 29 ms waiting for memory
    (GCViewer counts those stalls as pauses; they stop one thread each)."""
    (stall,) = _findings("gcviewer/sample-ujl-zgc-gc-other.txt")
    assert (stall.rule, stall.severity) == ("jvm-gc-failures", Severity.WARNING)
    assert stall.title.startswith("Allocation stall: 14 time(s)")
    assert stall.fix is not None and "ConcGCThreads" in stall.fix.summary


def _nd4j_cpu(threads: int, cores: int) -> list[Finding]:
    """ND4J's CPU start-up lines as the DL4J performance guide quotes them (step 1), with
    the OpenMP threads and the cores given."""
    lines = [
        "o.n.l.f.Nd4jBackend - Loaded [CpuBackend] backend",
        f"o.n.n.NativeOpsHolder - Number of threads used for NativeOps: {threads}",
        f"o.n.n.Nd4jBlas - Number of threads used for BLAS: {threads}",
        "o.n.l.a.o.e.DefaultOpExecutioner - Backend used: [CPU]; OS: [Windows 10]",
        f"o.n.l.a.o.e.DefaultOpExecutioner - Cores: [{cores}]; Memory: [7.1GB];",
        "o.n.l.a.o.e.DefaultOpExecutioner - Blas vendor: [MKL]",
    ]
    train = parse_dl4j("train.log", lines)
    return [
        f for f in build_report(to_record(train, [], ("t",))).findings if f.rule == "dl4j-setup"
    ]


def test_nd4js_openmp_threads_against_its_cores_on_the_cpu_backend() -> None:
    # the guide's own lines: 8 threads (ND4J's default, one a physical core) on 16 cores
    assert _nd4j_cpu(8, 16) == []
    (over,) = _nd4j_cpu(32, 16)
    assert (
        over.severity == Severity.WARNING
        and over.title == "ND4J runs 32 OpenMP threads on 16 cores"
    )
    assert over.fix is not None and "OMP_NUM_THREADS" in over.fix.summary
    (one,) = _nd4j_cpu(1, 16)
    assert one.severity == Severity.INFO and "1 OpenMP thread of 16 cores" in one.title
    assert _nd4j_cpu(1, 2) == []  # two cores: one thread may be the default


def test_the_cuda_backends_native_threads_are_not_a_cpu_setting() -> None:
    """dl4j-benchmark's CUDA run: 32 NativeOps threads on 12 cores, which feed the GPU."""
    train = parse_dl4j("x", (DL4J / "output_v100beta_cuda91-cudnn_32.txt").read_text().splitlines())
    findings = build_report(to_record(train, [], ("t",))).findings
    assert not any("OpenMP" in f.title for f in findings)


def test_a_unified_logs_system_gc_is_the_programs_call() -> None:
    """garbagecat's dataset184: 'Pause Full (System.gc())' in unified logging; its cause is
    read whole, parentheses and all, so the full collection is the program's call."""
    (log,) = [read_gc_log(GC / "garbagecat" / "dataset184.txt")]
    assert [(c.kind, c.cause) for c in log.causes] == [("full", "System.gc()")]
    (full,) = [f for f in _findings("garbagecat/dataset184.txt") if f.rule == "jvm-full-gcs"]
    assert "called by the program" in full.title
