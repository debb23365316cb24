"""Reading logs: kinds told from their lines, folders, .gz, stdin, truncated and hostile input
(hypothesis), DL4J's lines in every form, and iterations placed among GC pauses."""

from __future__ import annotations

import gzip
import io
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stepdoctor.errors import LogError
from stepdoctor.logs import read_gc_log, read_logs
from stepdoctor.logs.dl4j import parse_dl4j
from stepdoctor.logs.feed import fast_path
from stepdoctor.logs.gc_jdk8 import parse_jdk8
from stepdoctor.logs.gc_unified import parse_unified
from stepdoctor.logs.record import FIT_PHASE
from stepdoctor.model.jvm import JvmGcLog
from stepdoctor.render.logs import logs_to_dict, render_logs_text
from stepdoctor.report import build_report
from tests.logs._readers import PARSERS, read_both
from tests.shared_data import LOGS as DATA
from tests.shared_data import needs

corpus = needs(DATA / "oracles.json")
DL4J = DATA / "dl4j" / "output_v100alpha_cuda91-cudnn_16.txt"
G1_JDK8 = DATA / "gc" / "gcviewer" / "SampleSun1_6_0G1_gc_verbose.txt"
UNIFIED = DATA / "gc" / "gcviewer" / "sample-ujl-g1-gc-all,safepoint,os+cpu.txt"


@corpus
def test_a_folder_is_every_file_in_it_each_by_its_kind(tmp_path: Path) -> None:
    (tmp_path / "train.log").write_bytes(DL4J.read_bytes())
    (tmp_path / "gc.log.gz").write_bytes(gzip.compress(G1_JDK8.read_bytes()))
    (tmp_path / "notes.txt").write_text("nothing to see\n")
    read = read_logs([str(tmp_path)])
    assert [log.source for log in read.gc_logs] == [str(tmp_path / "gc.log.gz")]
    assert read.gc_logs[0].pauses == 2978  # GCViewer's figure, through gzip
    assert len(read.dl4j_logs) == 1 and len(read.dl4j_logs[0].iterations) == 199
    assert any("notes.txt: neither" in w for w in read.warnings)
    assert read.record.from_logs and len(read.record.steps) == 199


def test_paths_with_no_log_are_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(LogError, match="no such file"):
        read_logs([str(tmp_path / "missing.log")])
    (tmp_path / "a.txt").write_text("hello\n")
    with pytest.raises(LogError, match="no DL4J or JVM GC log"):
        read_logs([str(tmp_path / "a.txt")])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(LogError, match="holds no files"):
        read_logs([str(empty)])


@corpus
def test_a_truncated_gz_reads_to_where_it_ends_with_a_warning(tmp_path: Path) -> None:
    whole = gzip.compress(G1_JDK8.read_bytes())
    cut = tmp_path / "gc.log.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    read = read_logs([str(cut)])
    (log,) = read.gc_logs
    assert 0 < log.pauses < 2978
    assert any("ends early" in w for w in read.warnings)


@corpus
def test_stdin_is_read_through_the_command_line(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, "-m", "stepdoctor", "logs", "-", "--json", str(out)],
        input=gzip.compress(UNIFIED.read_bytes()),
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    gc = json.loads(out.read_text())["gc"]
    assert (gc["pauses"], gc["collector"]) == (27, "G1")
    keys = ("pauses", "total_pause_s", "max_pause_s", "mean_pause_s", "throughput_pct",
            "full_gcs", "duration_s", "collector")  # fmt: skip
    assert all(k in gc for k in keys)
    assert gc["mean_pause_s"] == pytest.approx(gc["total_pause_s"] / gc["pauses"], abs=1e-6)


def test_a_missing_file_is_one_line_and_exit_code_1(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "stepdoctor", "logs", str(tmp_path / "nope.log")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().count("\n") == 0 and "no such file" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_performance_listener_lines_of_every_form() -> None:
    lines = [
        # the guide's, with the score and the collectors' time (reportGC)
        "o.d.o.l.PerformanceListener - ETL: 0 ms; iteration 30; iteration time: 17 ms; "
        "samples/sec: 588.235; batches/sec: 58.824; score: 0.7229335801186025; "
        "GC: [PS Scavenge: 2 (1ms)], [PS MarkSweep: 2 (24ms)];",
        # a German JVM's decimal commas, a logger's time of day
        "10:11:12.345 [main] INFO o.d.o.l.PerformanceListener - ETL: 12 ms; iteration 16; "
        "iteration time: 65 ms; samples/sec: 492,308; batches/sec: 15,384; ",
        # several devices; a date and time
        "2019-03-01 10:11:12,500 INFO PerformanceListener - Device: [1]; ETL: 3 ms; "
        "iteration 17; iteration time: 66 ms; samples/sec: 484,848; batches/sec: 15,152; ",
        # fields switched off (Builder: no ETL, no iteration)
        "o.d.o.l.PerformanceListener - iteration time: 0 ms; samples/sec: Infinity; "
        "batches/sec: Infinity; ",
        "Score at iteration 40 is 0.4567",
    ]
    log = parse_dl4j("x", lines)
    first, second, third, fourth = log.iterations
    assert (first.gc_ms, first.gc_count, first.score) == (25.0, 4, pytest.approx(0.72293358))
    assert (second.etl_ms, second.samples_per_s, second.batches_per_s) == (12.0, 492.308, 15.384)
    assert second.day_s == 10 * 3600 + 11 * 60 + 12.345
    assert third.device == 1 and third.unix_s is not None
    assert fourth.etl_ms is None and fourth.iteration == 3 and math.isinf(fourth.samples_per_s)
    assert log.scores == ((40, 0.4567),)


@corpus
def test_the_corpus_dl4j_run_its_facts_and_batch() -> None:
    read = read_logs([str(DL4J)])
    facts = dict(read.dl4j_logs[0].facts)
    assert facts["nd4j.backend"] == "CUDA" and facts["nd4j.blas"] == "CUBLAS"
    assert facts["nd4j.periodic_gc"] == "true" and facts["nd4j.periodic_gc_ms"] == "5000"
    assert facts["dl4j.workspace_training"] == "SINGLE"
    steps = read.record.steps
    assert {s.batch_size for s in steps} == {16}  # samples/sec / batches/sec
    assert all(sum(s.phase_ns.values()) == s.duration_ns for s in steps)
    report = build_report(read.record)
    # an ETL of 0-1 ms is no wait; periodic GC with workspaces on is told, as info
    assert [(f.rule, f.severity.value) for f in report.findings] == [("dl4j-setup", "info")]
    text = render_logs_text(report, read.gc_logs, read.dl4j_logs, width=100)
    assert "199 PerformanceListener iterations" in text and "backend CUDA" in text


def _perf(i: int, etl: int, time_ms: int, when: str = "") -> str:
    return (
        f"{when}o.d.o.l.PerformanceListener - ETL: {etl} ms; iteration {i}; iteration time: "
        f"{time_ms} ms; samples/sec: 512.000; batches/sec: 16.000; "
    )


def test_an_etl_bound_dl4j_job_is_told_in_dl4js_terms() -> None:
    """Synthetic lines (no public DL4J log has a slow ETL): 40% of each iteration waits."""
    lines = [_perf(i, 24 + i % 3, 60 + i % 4) for i in range(100)]
    read = read_logs_from_lines(lines)
    report = build_report(read.record)
    top = report.findings[0]
    assert top.rule == "input-bound" and top.severity.value == "critical"
    assert top.fix is not None and "AsyncDataSetIterator" in top.fix.summary
    assert "DataLoader" not in top.fix.summary and "num_workers" not in (top.fix.snippet or "")


def test_etl_that_never_reads_above_zero_cannot_be_told() -> None:
    read = read_logs_from_lines([_perf(i, 0, 60) for i in range(50)])
    findings = build_report(read.record).findings
    assert [(f.rule, f.severity.value) for f in findings] == [("dl4j-setup", "info")]
    assert "cannot be told" in findings[0].title


def read_logs_from_lines(lines: list[str], tmp: Path | None = None):  # type: ignore[no-untyped-def]
    from stepdoctor.logs import LogsRead
    from stepdoctor.logs.record import to_record

    log = parse_dl4j("train.log", lines)
    return LogsRead(record=to_record(log, [], ("t",)), gc_logs=(), dl4j_logs=(log,), warnings=())


@pytest.mark.parametrize("zone", ["UTC", "America/Los_Angeles"])
def test_iterations_get_the_gc_pauses_that_fell_in_them(
    zone: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A logger with dates (local, no offset) and a GC log with dates (JDK 8,
    PrintGCDateStamps, +0200): each pause lands in the iteration it interrupted, by the job's
    wall clock, whatever the time zone of the machine reading them."""
    monkeypatch.setenv("TZ", zone)
    time.tzset()
    perf = [
        _perf(i, 0, 100, f"2021-01-01 00:00:{i // 10:02d}.{i % 10}00 INFO ") for i in range(1, 51)
    ]
    gc = [
        f"2021-01-01T00:00:0{s}.{ms:03d}+0200: {s}.{ms:03d}: [GC (Allocation Failure) "
        f"[PSYoungGen: 1000K->100K(2000K)] 3000K->2100K(9000K), 0.0400000 secs] "
        "[Times: user=0.01 sys=0.00, real=0.04 secs]"
        for s, ms in ((1, 520), (2, 530), (3, 540))
    ]
    dl4j = parse_dl4j("train.log", perf)
    gc_log = parse_jdk8("gc.log", gc)
    from stepdoctor.logs.record import to_record

    record = to_record(dl4j, [gc_log], ("t",))
    hit = [s for s in record.steps if s.gc_count]
    # the pause at :01.520 falls in the iteration logged at :01.600 (it began at :01.500)
    assert [(s.index, s.gc_pause_ns) for s in hit] == [
        (15, 40_000_000), (25, 40_000_000), (35, 40_000_000)
    ]  # fmt: skip
    assert all(s.phase_ns[FIT_PHASE] + s.phase_ns["data_wait"] == s.duration_ns for s in hit)


@corpus
@settings(deadline=None)
@given(
    which=st.sampled_from([G1_JDK8, UNIFIED, DL4J, DATA / "gc/jifa/8CMSParser.log"]),
    cut=st.floats(0, 1),
    junk=st.binary(max_size=300),
    at=st.floats(0, 1),
)
def test_cut_or_corrupted_logs_never_raise(which: Path, cut: float, junk: bytes, at: float) -> None:
    """Any prefix of a real log, with random bytes spliced in anywhere: read to what it holds,
    lines that look like events but are not counted as unparsed, never a traceback."""
    data = which.read_bytes()[:20_000]
    data = data[: int(len(data) * cut)]
    where = int(len(data) * at)
    data = data[:where] + junk + data[where:]
    lines = [b.decode("utf-8", "replace") for b in data.splitlines()]
    for parse in (parse_jdk8, parse_unified):
        log = parse("f", lines)
        assert log.pauses >= 0 and log.total_pause_s >= 0 and log.lines == len(lines)
    parse_dl4j("f", lines)
    (source,) = open_sources_from_bytes(data)
    if source.kind in ("jdk8-gc", "unified-gc", "dl4j"):
        read = read_logs_from_source(source)
        report = build_report(read.record)
        json.dumps(logs_to_dict(report, read.gc_logs, read.dl4j_logs), allow_nan=False)


def open_sources_from_bytes(data: bytes):  # type: ignore[no-untyped-def]
    from stepdoctor.logs.sources import _source

    return [_source("f", io.BytesIO(data))]  # type: ignore[arg-type]


def read_logs_from_source(source):  # type: ignore[no-untyped-def]
    from stepdoctor.logs import LogsRead, read_gc_source
    from stepdoctor.logs.record import to_record

    if source.kind == "dl4j":
        log = parse_dl4j(source.name, source.lines)
        return LogsRead(to_record(log, [], ("t",)), (), (log,), ())
    gc = read_gc_source(source)
    return LogsRead(to_record(None, [gc], ("t",)), (gc,), (), ())


@corpus
def test_the_gc_section_of_a_real_g1_log() -> None:
    log = read_gc_log(G1_JDK8)
    read = read_logs([str(G1_JDK8)])
    data = logs_to_dict(build_report(read.record), read.gc_logs, read.dl4j_logs)
    gc = data["gc"]
    assert gc["pauses"] == log.pauses == 2978
    assert gc["throughput_pct"] == pytest.approx(47.7730602904, abs=0.01)  # GCViewer's test
    assert gc["collector"] == "G1" and gc["full_gcs"] == 5
    assert data["findings"][0]["rule"] == "jvm-gc-overhead"


def test_a_log_without_time_stamps_has_pauses_but_no_span() -> None:
    """-verbose:gc alone: pauses, no time: no throughput, and no share of time is claimed."""
    lines = [
        f"[GC (Allocation Failure) [PSYoungGen: 1000K->100K(2000K)] 3000K->2100K(9000K), "
        f"0.0{i % 9 + 1}00000 secs]"
        for i in range(30)
    ] + ["[Full GC (System.gc()) [PSYoungGen: 100K->0K(2000K)] [ParOldGen: 2000K->900K(7000K)] "
         "2100K->900K(9000K), 0.2000000 secs]"]  # fmt: skip
    log = parse_jdk8("gc.log", lines)
    assert log.pauses == 31 and log.full_gcs == 1
    assert log.duration_s == 0.0 and log.throughput_pct is None
    from stepdoctor.logs.record import to_record

    findings = build_report(to_record(None, [log], ("t",))).findings
    assert not [f for f in findings if "% of the time" in f.title or "% of the JVM" in f.title]
    assert [f.title for f in findings if f.rule == "jvm-full-gcs"] == [
        "1 full collection(s) called by the program (gc.log)"
    ]


def test_unified_lines_of_generational_zgc_and_without_decorations() -> None:
    zgc = parse_unified("z", [
        "[0.100s][info][gc] Using The Z Garbage Collector",
        "[1.000s][info][gc,phases] GC(0) Y: Pause Mark Start 0.010ms",
        "[1.020s][info][gc,phases] GC(0) Y: Pause Mark End 0.020ms",
        "[1.030s][info][gc,phases] GC(0) Y: Pause Relocate Start 0.005ms",
    ])  # fmt: skip
    assert (zgc.pauses, zgc.collector) == (3, "ZGC")
    plain = ["Using G1", "GC(0) Pause Young (Normal) (G1 Evacuation Pause) 24M->4M(256M) 3.456ms"]
    (source,) = open_sources_from_bytes("\n".join(plain).encode())
    assert source.kind == "unified-gc"
    log = parse_unified("u", plain)
    assert (log.pauses, log.collector, log.throughput_pct) == (1, "G1", None)


def test_odd_listener_numbers_are_skipped_not_raised() -> None:
    log = parse_dl4j("x", [
        "Score at iteration 10 is 1.234.",
        "Score at iteration 11 is abc",
        "o.d.o.l.PerformanceListener - ETL: 0 ms; iteration 1; iteration time: "
        + "9" * 400 + " ms; samples/sec: 1.000; batches/sec: 1.000; ",
    ])  # fmt: skip
    assert log.scores == ((10, 1.234),)
    assert log.iterations == () and log.unparsed == 1


@corpus
def test_a_file_of_a_folder_that_cannot_be_opened_is_skipped_with_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "gc.log").write_bytes(G1_JDK8.read_bytes())
    (tmp_path / "secret.log").write_text("x\n")
    real_open = Path.open

    def refusing(self: Path, *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        if self.name == "secret.log":
            raise PermissionError(13, "Permission denied")
        return real_open(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "open", refusing)
    read = read_logs([str(tmp_path)])
    assert [log.pauses for log in read.gc_logs] == [2978]
    assert any(
        "secret.log: cannot be read (Permission denied); skipped" in w for w in read.warnings
    )


def test_the_gc_finding_says_how_much_of_the_iterations_the_pauses_took() -> None:
    """12 pauses of 100 ms, one a second, beside iterations of 100 ms logged by a logger
    with dates: 10% of the log's span in pauses, and the iterations they fell in."""
    perf = [
        _perf(i, 0, 100, f"2021-01-01 00:00:{i // 10:02d}.{i % 10}00 INFO ") for i in range(1, 140)
    ]
    gc = [
        f"2021-01-01T00:00:{s:02d}.250+0100: {s}.250: [GC (Allocation Failure) "
        f"[PSYoungGen: 1000K->100K(2000K)] 3000K->2100K(9000K), 0.1000000 secs]"
        for s in range(1, 13)
    ]
    from stepdoctor.logs.record import to_record

    record = to_record(parse_dl4j("train.log", perf), [parse_jdk8("gc.log", gc)], ("t",))
    (overhead,) = [f for f in build_report(record).findings if f.rule == "jvm-gc-overhead"]
    ev = {e.metric: e.value for e in overhead.evidence}
    # (of the iterations after the warm-up the summary leaves out: 2 of the 12 fell in it)
    assert ev["iterations a pause fell in"] == 10
    assert 0.05 < ev["share of the iterations' time in GC pauses"] < 0.15


def test_a_logger_writing_the_time_of_day_only_is_put_on_the_gc_logs_days() -> None:
    """The DL4J guide's logger form ("13:08:09,042 INFO ~"): no date. Its iterations are put
    on the GC log's day, and the next day after midnight: the same pauses fall in them as
    with a dated logger, across midnight too."""
    from stepdoctor.logs.record import to_record

    def run(first_s: int, gc_day: str, next_day: str) -> dict[str, object]:
        perf = []
        for i in range(1, 140):
            t = (first_s + i // 10) % 86_400
            when = f"{t // 3600:02d}:{t // 60 % 60:02d}:{t % 60:02d},{i % 10}00 INFO  ~ "
            perf.append(_perf(i, 0, 100, when))
        gc = []
        for s in range(1, 13):
            t = first_s + s
            day = gc_day if t < 86_400 else next_day
            t %= 86_400
            gc.append(
                f"{day}T{t // 3600:02d}:{t // 60 % 60:02d}:{t % 60:02d}.250+0100: {s}.250: "
                f"[GC (Allocation Failure) [PSYoungGen: 1000K->100K(2000K)] 3000K->2100K(9000K), "
                f"0.1000000 secs]"
            )
        record = to_record(parse_dl4j("train.log", perf), [parse_jdk8("gc.log", gc)], ("t",))
        (overhead,) = [f for f in build_report(record).findings if f.rule == "jvm-gc-overhead"]
        return {e.metric: e.value for e in overhead.evidence}

    same_day = run(13 * 3600, "2021-01-01", "2021-01-02")
    assert same_day["iterations a pause fell in"] == 10
    across = run(86_400 - 6, "2021-01-01", "2021-01-02")  # 23:59:54 to 00:00:07
    assert across["iterations a pause fell in"] == 10
    assert (
        across["share of the iterations' time in GC pauses"]
        == same_day["share of the iterations' time in GC pauses"]
    )


def _interleave(train: list[str], gc: list[str]) -> str:
    """A training run's stdout with the JVM's GC lines among its own, as a java process
    writes both (-verbose:gc or -Xlog:gc to stdout): a GC line after every few of its own."""
    out, step = [], max(1, len(train) // max(1, len(gc)))
    for i, line in enumerate(train):
        out.append(line)
        if i % step == step - 1 and gc:
            out.append(gc.pop(0))
    return "\n".join(out + gc) + "\n"


@corpus
@pytest.mark.parametrize(
    "gc_file", ["SampleSun1_6_0G1_gc_verbose.txt", "sample-ujl-g1-gc-defaults.txt"]
)
def test_a_training_logs_stdout_with_the_jvms_gc_lines_is_read_as_both(
    tmp_path: Path, gc_file: str
) -> None:
    """dl4j-benchmark's real output with a real GC log's lines among it: the DL4J log, and
    the GC log with every pause its own file has, none of the logger's lines unparsed."""
    train = (DATA / "dl4j" / "output_v100alpha_cuda91-cudnn_16.txt").read_text().splitlines()
    gc_path = DATA / "gc" / "gcviewer" / gc_file
    gc = gc_path.read_text().splitlines()[:300]
    mixed = tmp_path / "stdout.log"
    mixed.write_text(_interleave(train, list(gc)))
    alone = tmp_path / "gc.log"
    alone.write_text("\n".join(gc) + "\n")
    read = read_logs([str(mixed)])
    (log,) = read.gc_logs
    assert len(read.dl4j_logs) == 1 and read.dl4j_logs[0].iterations
    expected = read_gc_log(alone)
    assert log.pauses == expected.pauses > 0
    assert log.total_pause_s == pytest.approx(expected.total_pause_s, abs=1e-9)
    assert log.unparsed == 0 and not any("could not be read" in w for w in read.warnings)
    # from stdin it cannot be read twice: said so, the training log still read
    proc = subprocess.run(
        [sys.executable, "-m", "stepdoctor", "logs", "-"],
        input=mixed.read_text(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "holds the JVM's GC lines too" in proc.stdout + proc.stderr


def _both_readers(lines: list[str], family: str) -> JvmGcLog:
    """The log read by its parser alone, equal to it through the C fast path where built."""
    pure = PARSERS[family]("gc.log", lines)
    if fast_path() is not None:
        fast, alone, _ = read_both(("\n".join(lines) + "\n").encode(), family, name="gc.log")
        assert fast == alone == pure
    return pure


def test_a_degenerated_shenandoah_cycle_is_its_own_kind_in_both_formats() -> None:
    """Shenandoah finishing a cycle stop-the-world is a pause and a sign of trouble, not a
    full collection (that is ``Pause Full``, when the degenerated cycle is upgraded to one);
    the JDK 8 builds' reader and the unified one agree. A log without its "Using" line is
    Shenandoah's by its pauses."""
    unified = _both_readers([
        "[1.000s][info][gc] GC(0) Pause Init Mark (unload classes) 0.472ms",
        "[1.100s][info][gc] GC(0) Pause Final Mark (unload classes) 0.610ms",
        "[2.125s][info][gc,start    ] GC(1) Pause Degenerated GC (Outside of Cycle)",
        "[2.138s][info][gc          ] GC(1) Pause Degenerated GC (Outside of Cycle) "
        "90M->15M(96M) 13.088ms",
        "[3.000s][info][gc] GC(2) Pause Degenerated GC (Update Refs) 91M->16M(92M) 1.271ms",
        "[3.100s][info][gc] GC(3) Degenerated GC upgrading to Full GC",
        "[3.400s][info][gc] GC(3) Pause Full 91M->40M(92M) 250.000ms",
    ], "unified")  # fmt: skip
    jdk8 = _both_readers([
        "2022-10-28T10:58:59.100-0400: [Pause Init Mark, 0.472 ms]",
        "2022-10-28T10:58:59.286-0400: [Pause Degenerated GC (Mark), start]",
        "2022-10-28T10:58:59.295-0400: [Pause Degenerated GC (Mark) 121M->19211K(122M), "
        "9.421 ms]",
    ], "jdk8")  # fmt: skip
    for log, degenerated, full in ((unified, 2, 1), (jdk8, 1, 0)):
        assert isinstance(log, JvmGcLog)
        assert log.collector == "Shenandoah" and log.full_gcs == full
        kinds = {(c.kind, c.cause): c.count for c in log.causes}
        assert kinds[("degenerated", "")] == degenerated
        assert [(p.name, p.count) for p in log.problems] == [("degenerated GC", degenerated)]
    from stepdoctor.logs.record import to_record

    findings = build_report(to_record(None, [unified], ("t",))).findings
    (failing,) = (f for f in findings if f.rule == "jvm-gc-failures")
    assert failing.title == "Degenerated GC: 2 time(s) (gc.log)" and "-Xmx" in failing.fix.summary


def test_jdk_6_and_7s_full_gc_system_is_a_system_gc_call() -> None:
    log = _both_readers([
        "2.473: [Full GC (System) 2.473: [CMS: 0K->1146K(1048576K), 0.0517710 secs] "
        "27526K->1146K(1992320K), [CMS Perm : 10723K->10719K(21248K)], 0.0518910 secs]",
        "3.473: [GC 3.473: [ParNew: 34944K->4352K(39296K), 0.0123 secs] 34944K->8765K(126720K), "
        "0.0124 secs]",
    ], "jdk8")  # fmt: skip
    assert isinstance(log, JvmGcLog)
    assert [(c.kind, c.cause) for c in log.causes if c.kind == "full"] == [("full", "System.gc()")]
    from stepdoctor.logs.record import to_record

    findings = build_report(to_record(None, [log], ("t",))).findings
    assert [f.title for f in findings if f.rule == "jvm-full-gcs"] == [
        "1 full collection(s) called by the program (gc.log)"
    ]


@pytest.mark.parametrize(
    ("lines", "collector"),
    [
        (
            ["[0.3s][gc] GC(7) Pause Young (Normal) (G1 Evacuation Pause) 90M->9M(128M) 3.8ms"],
            "G1",
        ),
        (
            ["[0.3s][gc] GC(7) Pause Young (Mixed) (G1 Evacuation Pause) 90M->9M(128M) 3.8ms"],
            "G1",
        ),
        (["[0.3s][info][gc] GC(2) Pause Final Mark 0.6ms"], "Shenandoah"),
        # Serial's and Parallel's young pauses read alike: no guess
        (["[0.3s][info][gc] GC(2) Pause Young (Allocation Failure) 90M->9M(128M) 3.8ms"], ""),
    ],
)
def test_a_unified_excerpt_without_its_using_line_is_named_by_its_pauses(
    lines: list[str], collector: str
) -> None:
    log = _both_readers(lines, "unified")
    assert isinstance(log, JvmGcLog) and log.collector == collector


#: Shenandoah logs of garbagecat's test data (mgm3746/garbagecat at fc65288e,
#: src/test/resources/data/), read where shared/logs holds them: JDK 8 builds' format
#: (dataset259), JDK 17's unified logging without a "Using" line (dataset285, dataset287).
SHENANDOAH = {
    "dataset259.txt": ("Shenandoah", 1),
    "dataset285.txt": ("Shenandoah", 1),
    "dataset287.txt": ("Shenandoah", 1),
}


@pytest.mark.parametrize("name", sorted(SHENANDOAH))
def test_real_shenandoah_logs_count_degenerated_cycles_apart_from_full_ones(name: str) -> None:
    path = DATA / "gc" / "garbagecat" / name
    if not path.exists():
        pytest.skip(f"shared/logs/gc/garbagecat/{name} is not available here")
    log = read_gc_log(str(path))
    collector, degenerated = SHENANDOAH[name]
    assert log.collector == collector and log.full_gcs == 0
    assert sum(c.count for c in log.causes if c.kind == "degenerated") == degenerated
    assert [(p.name, p.count) for p in log.problems] == [("degenerated GC", degenerated)]
