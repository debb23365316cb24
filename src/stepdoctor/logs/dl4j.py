"""DL4J training logs: PerformanceListener lines (every version's fields, any of them
switched off, ``Device: [n];`` on several devices, decimal commas from a JVM's locale, the
collectors' time with ``reportGC``), ScoreIterationListener lines, ND4J's start-up lines
(backend, BLAS vendor, threads, cuDNN, workspaces, periodic GC) and dl4j-benchmark's summary
table, in one streaming pass.

PerformanceListener (deeplearning4j-nn ``optimize/listeners/PerformanceListener.java``) logs
every ``frequency`` iterations: ``iteration time`` is the wall time since the listener's
previous call, one iteration with its ETL (the wait for the next batch); ``samples/sec`` is
the batch over that time, so batch = samples/sec / batches/sec.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from datetime import datetime, timezone

from stepdoctor.logs.gc_stats import UNPARSED_SAMPLES
from stepdoctor.model.jvm import Dl4jIteration, Dl4jLog

__all__ = ["parse_dl4j"]

# a number as Java's String.format("%.3f") writes it in any locale: 492.308, 492,308,
# 1.234,567 (de_DE: "." groups thousands only with "%,.3f", which the listener does not use)
_NUM = r"(?:\d+(?:[.,]\d+)?|Infinity|NaN|∞)"
_PERF = re.compile(
    r"(?:Device: \[(?P<device>\d+)\]; )?"
    r"(?:ETL: (?P<etl>\d+) ms; )?"
    r"(?:iteration (?P<iteration>\d+); )?"
    r"iteration time: (?P<time>\d+) ms; "
    rf"(?:samples/sec: (?P<samples>{_NUM}); )?"
    rf"(?:batches/sec: (?P<batches>{_NUM}); )?"
    r"(?:score: (?P<score>[-+\w.,]+);)?"
    r"(?:\s*GC: (?P<gc>.*?);)?"
)
_GC = re.compile(r"\[([^:\]]+): (\d+) \((\d+)ms\)\]")
_SCORE = re.compile(r"Score at iteration (\d+) is (\S+)")
# the logger's stamp, where it has one: "2018-03-14 10:11:12.345", "10:11:12.345"
_DATETIME = re.compile(r"(\d{4}-\d\d-\d\d)[ T](\d\d):(\d\d):(\d\d)[.,](\d{3})")
_TIME = re.compile(r"(?<![\d:])(\d\d):(\d\d):(\d\d)[.,](\d{3})")
#: ND4J's and DL4J's start-up lines -> (fact, value)
_FACTS = (
    (re.compile(r"Loaded \[(\w+)\] backend"), "nd4j.backend_class"),
    (re.compile(r"Backend used: \[(\w+)\]"), "nd4j.backend"),
    (re.compile(r"Blas vendor: \[(\w+)\]"), "nd4j.blas"),
    (re.compile(r"Number of threads used for (?:linear algebra|BLAS): (\d+)"), "nd4j.blas_threads"),
    (re.compile(r"Number of threads used for (?:NativeOps|OpenMP): (\d+)"), "nd4j.omp_threads"),
    (re.compile(r"Cores: \[(\d+)\]"), "nd4j.cores"),
    (re.compile(r"Memory: \[([\d.]+\s*\w+)\]"), "nd4j.memory"),
    (re.compile(r"Device (?:opName|Name): \[([^\]]+)\]"), "nd4j.device"),
    (re.compile(r"WorkspaceModes set to \[training: (\w+)"), "dl4j.workspace_training"),
    (re.compile(r"workspace: (\w+),"), "dl4j.workspace"),
    (
        re.compile(
            r"cuDNN (?:not found|is not available)|CuDNN is not available|"
            r"cuDNN helper .*? (?:not|could not)",
            re.I,
        ),
        "dl4j.cudnn_missing",
    ),
    (re.compile(r"(?:^|\s)CUDNN Version\s+(\d+)"), "nd4j.cudnn_version"),
    (re.compile(r"(?:^|\s)CUDA Version\s+(\d+)"), "nd4j.cuda_version"),
    (re.compile(r"Periodic GC enabled\s+(\w+)"), "nd4j.periodic_gc"),
    (re.compile(r"Periodic GC frequency\s+(\d+)"), "nd4j.periodic_gc_ms"),
    (re.compile(r"(?:^|\s)Batch size\s+(\d+)"), "dl4j.batch_size"),
    (re.compile(r"(?:^|\s)Avg Iteration \(ms\)\s+([\d.,]+)"), "dl4j.benchmark_iteration_ms"),
    (re.compile(r"(?:^|\s)Avg Samples/sec\s+([\d.,]+)"), "dl4j.benchmark_samples_per_s"),
    (re.compile(r"(?:^|\s)Total Params\s+(\d+)"), "dl4j.total_params"),
    (re.compile(r"(?:^|\s)Backend\s{5,}(\w+)$"), "nd4j.backend"),
    (re.compile(r"(?:^|\s)BLAS Vendor\s{5,}(\w+)$"), "nd4j.blas"),
)


def _num(text: str | None) -> float | None:
    """A number as the listener wrote it (None: none, or not a number)."""
    if text is None:
        return None
    if text in ("Infinity", "∞"):
        return float("inf")
    if text == "NaN":
        return float("nan")
    try:
        return float(text.replace(",", "."))
    except ValueError:
        return None


def parse_dl4j(source: str, lines: Iterable[str]) -> Dl4jLog:
    """Read a DL4J training log's ``lines`` into its iterations, scores and facts."""
    iterations: list[Dl4jIteration] = []
    scores: list[tuple[int, float]] = []
    facts: dict[str, str] = {}
    unparsed = count = 0
    samples: list[str] = []
    for line in lines:
        count += 1
        if "iteration time:" in line:
            found = _PERF.search(line)
            if found is None:
                unparsed += 1
                if len(samples) < UNPARSED_SAMPLES:
                    samples.append(line[:300])
                continue
            iteration = _iteration(found, line, len(iterations))
            if not math.isfinite(iteration.time_ms) or (
                iteration.etl_ms is not None and not math.isfinite(iteration.etl_ms)
            ):
                unparsed += 1
                if len(samples) < UNPARSED_SAMPLES:
                    samples.append(line[:300])
                continue
            iterations.append(iteration)
            continue
        if "Score at iteration" in line:
            score = _SCORE.search(line)
            if score is not None:
                value = _num(score.group(2).rstrip(";.,"))
                if value is not None:
                    scores.append((int(score.group(1)), value))
            continue
        for pattern, name in _FACTS:
            fact = pattern.search(line)
            if fact is not None and name not in facts:
                facts[name] = fact.group(1) if fact.groups() else "true"
    return Dl4jLog(
        source=source,
        iterations=tuple(iterations),
        scores=tuple(scores),
        facts=tuple(sorted(facts.items())),
        lines=count,
        unparsed=unparsed,
        unparsed_samples=tuple(samples),
    )


def _iteration(found: re.Match[str], line: str, seen: int) -> Dl4jIteration:
    gc_ms = gc_count = None
    if found.group("gc"):
        collectors = _GC.findall(found.group("gc"))
        gc_count = sum(int(c) for _, c, _ in collectors)
        gc_ms = float(sum(int(ms) for _, _, ms in collectors))
    etl = found.group("etl")
    unix_s = day_s = None
    stamp = _DATETIME.search(line, 0, found.start())
    if stamp is not None:
        date, hh, mm, ss, ms = stamp.groups()
        try:
            # the logger's local time, read as if UTC: lined up with a GC log's dates in
            # their own offset (logs.record), whatever this machine's time zone
            wall = datetime.fromisoformat(f"{date}T{hh}:{mm}:{ss}.{ms}")
            unix_s = wall.replace(tzinfo=timezone.utc).timestamp()
        except ValueError:
            unix_s = None
    else:
        clock = _TIME.search(line, 0, found.start())
        if clock is not None:
            hh, mm, ss, ms = (int(g) for g in clock.groups())
            day_s = hh * 3600 + mm * 60 + ss + ms / 1000
    iteration = found.group("iteration")
    return Dl4jIteration(
        iteration=int(iteration) if iteration is not None else seen,
        time_ms=float(found.group("time")),
        etl_ms=None if etl is None else float(etl),
        samples_per_s=_num(found.group("samples")),
        batches_per_s=_num(found.group("batches")),
        score=_num(found.group("score").rstrip(";")) if found.group("score") else None,
        gc_ms=gc_ms,
        gc_count=gc_count,
        device=None if found.group("device") is None else int(found.group("device")),
        unix_s=unix_s,
        day_s=day_s,
    )
