"""Every GC log of the corpus (shared/logs: real logs of public projects, byte-exact) read
to the figures its oracle gives: GCViewer's (asserted by its own tests, or its run on the
file), since our definitions are GCViewer's; and where our reading differs from GCViewer's on
purpose, or GCViewer cannot read the file, figures computed from the lines (``COMPUTED``,
each with how)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from stepdoctor.logs import read_gc_log
from stepdoctor.logs.sources import open_sources
from tests.shared_data import LOGS as DATA
from tests.shared_data import needs

pytestmark = needs(DATA / "oracles.json")
ORACLES: list[dict[str, Any]] = (
    json.loads((DATA / "oracles.json").read_text()) if (DATA / "oracles.json").exists() else []
)
GC_FILES = [e for e in ORACLES if e["file"].startswith("gc/")]

#: Seconds and percentage points the figures may differ by (the issue's terms): pause counts
#: exactly, seconds within 1 ms, throughput within 0.01 point.
SECONDS = 1e-3
POINTS = 0.01

MS = 1e-3
#: file -> figures computed from its lines where GCViewer's reading is not ours (model.jvm,
#: docs/logs.md) or GCViewer cannot read it: ``pauses``, ``total_pause_s``, ``max_pause_s``,
#: ``full_gcs``, ``throughput_pct`` (the run spans from the first event to the last, plus the
#: last pause, as GCViewer's running time).
COMPUTED: dict[str, dict[str, float]] = {
    # GCViewer counts each "GC(n) To-space exhausted" line (3) as a pause of 0 s: 10 pauses.
    "gc/gcviewer/sample-ujl-g1-gc-defaults.txt": {
        "pauses": 10, "total_pause_s": 0.03815, "max_pause_s": 0.014918, "full_gcs": 1,
        "throughput_pct": 92.274043622,
    },
    # Serial: GC(3), GC(7), GC(10) (Pause Full 7.097, 6.775, 3.942 ms) ran inside the young
    # collections GC(2), GC(6), GC(9) (7.236, 8.156, 4.018 ms), whose times include them.
    # GCViewer adds both: 83.938 ms; once, 66.124 ms. The run: 0.202 s to 0.391 s plus the
    # last pause, GC(9)'s own 0.076 ms.
    "gc/gcviewer/sample-ujl-serial-gc-defaults.txt": {
        "pauses": 11, "total_pause_s": 0.066124, "max_pause_s": 0.013160, "full_gcs": 3,
        "throughput_pct": 100 * (0.189076 - 0.066124) / 0.189076,
    },
    # A stop at a safepoint holds every GC pause since the stop before it; GCViewer subtracts
    # only the last. CMS's remark (0.997 ms) and the young collection inside it (0.0537 ms),
    # then a stop of 1.1523 ms: 0.1016 ms beyond them. The span as GCViewer's, that stop's
    # share less: 0.0151016 s.
    "gc/gcviewer/SampleSun1_7_0_51_CMS_PrintApplStoppedTime.txt": {
        "pauses": 5, "total_pause_s": 0.0015025, "max_pause_s": 0.000997, "full_gcs": 0,
        "throughput_pct": 100 * (0.0151016 - 0.0015025) / 0.0151016,
    },
    # Parallel's young collections that failed into a full one in the same safepoint (the stop
    # after them holds both): 2747.384163 s of pauses (GCViewer: 2816.516812); the span is
    # GCViewer's, 2827.918043 s.
    "gc/garbagecat/dataset103.txt": {
        "pauses": 311, "total_pause_s": 2747.384163, "max_pause_s": 179.099451, "full_gcs": 129,
        "throughput_pct": 100 * (2827.918043 - 2747.384163) / 2827.918043,
    },
    # A full collection inside a young one, each followed by a stop that holds both: counted
    # once (GCViewer: 35.3405 ms, 80.1894 ms). Spans: 0.070 s to the stop at 0.290 s plus its
    # 0.1894 ms; 0.072 s to 0.330 s plus 5.794 ms.
    "gc/gcviewer/sample-ujl-serial-gc-all,safepoint,os+cpu.txt": {
        "pauses": 8, "total_pause_s": 0.0283535, "max_pause_s": 0.010926, "full_gcs": 1,
        "throughput_pct": 100 * (0.2203204 - 0.0283535) / 0.2203204,
    },
    "gc/gcviewer/sample-ujl-parallel-gc-all,safepoint,os+cpu.txt": {
        "pauses": 14, "total_pause_s": 0.0649454, "max_pause_s": 0.013561, "full_gcs": 4,
        "throughput_pct": 100 * (0.263794 - 0.0649454) / 0.263794,
    },
    # ZGC with -Xlog:gc: 5 cycles and no pause times (GCViewer: 5 pauses of 0 s).
    "gc/gcviewer/sample-ujl-zgc-gc-default.txt": {
        "pauses": 0, "total_pause_s": 0.0, "max_pause_s": 0.0, "full_gcs": 0,
        "throughput_pct": 100.0,
    },
    # ZGC's pauses one by one (GCViewer: one per cycle, their sum): Mark Start 1.279 ms at
    # 1.206 s, Mark End 0.695, Relocate Start 0.679; the cycle ends at 1.221 s.
    "gc/gcviewer/sample-ujl-zgc-gc-all.txt": {
        "pauses": 3, "total_pause_s": 2.653 * MS, "max_pause_s": 1.279 * MS, "full_gcs": 0,
        "throughput_pct": 100 * (0.015679 - 0.002653) / 0.015679,
    },
    # As above (0.008, 0.011, 0.006 ms from 200.344 s; the cycle ends at 201.658 s), and the
    # 14 allocation/relocation stalls, which stop one thread each, are no pauses (GCViewer:
    # 15 pauses, 90.5 ms).
    "gc/gcviewer/sample-ujl-zgc-gc-other.txt": {
        "pauses": 3, "total_pause_s": 0.025 * MS, "max_pause_s": 0.011 * MS, "full_gcs": 0,
        "throughput_pct": 100 * (1.314006 - 0.000025) / 1.314006,
    },
    # 0.007, 0.031, 0.008 ms from 0.918 s; the cycle ends at 0.950 s.
    "gc/jifa/17ZGCParser.log": {
        "pauses": 3, "total_pause_s": 0.046 * MS, "max_pause_s": 0.031 * MS, "full_gcs": 0,
        "throughput_pct": 100 * (0.032008 - 0.000046) / 0.032008,
    },
    # GCViewer misses the stop logged with two date and two uptime stamps ("...: ...: 725.081:
    # 725.081: Total time ... stopped: 0.0227079 seconds"), 4.4395 ms beyond the 18.2684 ms
    # pause before it.
    "gc/jifa/8ConcurrentPrintDateTimeStamp.log": {
        "pauses": 8, "total_pause_s": 0.2215878 + 0.0044395, "max_pause_s": 0.135056,
        "full_gcs": 0, "throughput_pct": 100 * (5.5426114 - 0.2260273) / 5.5426114,
    },
    # GCViewer loses GC(0)'s young pause (10.709 ms) to the "To-space exhausted" line before
    # it, and counts the 10.1229 ms stop after it whole. Ours: young 10.709, remark 2.381,
    # cleanup 0.094, full 67.806 ms, and the stop, shorter than the pause it holds: 0.
    "gc/jifa/11G1Parser.log": {
        "pauses": 5, "total_pause_s": 0.080990, "max_pause_s": 0.067806, "full_gcs": 1,
        "throughput_pct": 100 * (6.180806 - 0.080990) / 6.180806,
    },
    # GCViewer finds no pause: the G1 pause's first line holds a concurrent phase's end
    # (interleaved output); its pause, 47.0136 ms, closes two lines later. The run: 160770.873
    # s to the concurrent phase at 160770.887 s, plus the pause.
    "gc/gcviewer/SampleSun1_8_0G1HumongousMixed.txt": {
        "pauses": 1, "total_pause_s": 0.0470136, "max_pause_s": 0.0470136, "full_gcs": 0,
        "throughput_pct": 100 * (0.0610136 - 0.0470136) / 0.0610136,
    },
    # GCViewer cannot read these (decorations without level and tags; Shenandoah in a JDK 8
    # build; dates only): garbagecat's counts and sums, one event spans no time.
    "gc/garbagecat/dataset184.txt": {
        "pauses": 1, "total_pause_s": 3.460196, "max_pause_s": 3.460196, "full_gcs": 1,
        "throughput_pct": 0.0,
    },
    # the line says 3.471 ms (garbagecat, preprocessing the file, reads 3.871; without, 3.471)
    "gc/garbagecat/dataset204.txt": {
        "pauses": 1, "total_pause_s": 3.471 * MS, "max_pause_s": 3.471 * MS, "full_gcs": 0,
        "throughput_pct": 0.0,
    },
    "gc/garbagecat/dataset207.txt": {
        "pauses": 1, "total_pause_s": 4.077274, "max_pause_s": 4.077274, "full_gcs": 1,
        "throughput_pct": 0.0,
    },
    "gc/garbagecat/dataset210.txt": {
        "pauses": 1, "total_pause_s": 0.521443, "max_pause_s": 0.521443, "full_gcs": 1,
        "throughput_pct": 0.0,
    },
    # 153 pauses (Mark Start, Mark End) from 0.125 s to 2.625 s, the last 0.004 ms.
    "gc/garbagecat/dataset243.txt": {
        "pauses": 153, "total_pause_s": 0.969 * MS, "max_pause_s": 0.037 * MS, "full_gcs": 0,
        "throughput_pct": 100 * (2.500004 - 0.000969) / 2.500004,
    },
    # Shenandoah, dates only: 0.472, 0.121, 0.025, 0.029 ms, from 17:56:59.043 (the cycle's
    # "Concurrent reset") to 59.073.
    "gc/garbagecat/dataset256.txt": {
        "pauses": 4, "total_pause_s": 0.647 * MS, "max_pause_s": 0.472 * MS, "full_gcs": 0,
        "throughput_pct": 100 * (0.030029 - 0.000647) / 0.030029,
    },
    # 3 pauses, 8.856 ms (garbagecat), from 7.006 s to the stall at 7.888 s, the last 3.791 ms.
    "gc/jifa/11ZGCParser.log": {
        "pauses": 3, "total_pause_s": 8.856 * MS, "max_pause_s": 4.459 * MS, "full_gcs": 0,
        "throughput_pct": 100 * (0.885791 - 0.008856) / 0.885791,
    },
}  # fmt: skip


def expected(entry: dict[str, Any]) -> dict[str, float]:
    """The figures ``entry``'s file must read to."""
    if entry["file"] in COMPUTED:
        return COMPUTED[entry["file"]]
    run = entry["oracle"].get("gcviewer_run") or {}
    assert run.get("pause_n") and not run.get("error"), f"{entry['file']}: no oracle"
    return {
        "pauses": run["pause_n"],
        "total_pause_s": run["pause_sum"],
        "max_pause_s": run["pause_max"],
        "full_gcs": run["full_gc_pause_n"],
        "throughput_pct": run["throughput"],
    }


@pytest.mark.parametrize("entry", GC_FILES, ids=[e["file"] for e in GC_FILES])
def test_gc_log_reads_to_its_oracle(entry: dict[str, Any]) -> None:
    log = read_gc_log(DATA / entry["file"])
    want = expected(entry)
    assert log.pauses == want["pauses"]
    assert log.total_pause_s == pytest.approx(want["total_pause_s"], abs=SECONDS)
    assert log.max_pause_s == pytest.approx(want["max_pause_s"], abs=SECONDS)
    assert log.full_gcs == want["full_gcs"]
    assert log.throughput_pct == pytest.approx(want["throughput_pct"], abs=POINTS)
    assert log.unparsed == 0, log.unparsed_samples


#: The figures of GCViewer's tests that are ours by name (the rest: its event-type tables,
#: its model's size).
ASSERTED = (
    "pauses", "total_pause_s", "max_pause_s", "full_gcs", "throughput_pct",
    "full_gc_pause_sum_s", "gc_pause_sum_s", "gc_pause_n", "vm_operation_pause_n",
)  # fmt: skip


def _asserted(entry: dict[str, Any]) -> dict[str, float]:
    figures = (entry["oracle"].get("gcviewer_asserted") or {}).get("figures") or {}
    return {k: v for k, v in figures.items() if k in ASSERTED}


@pytest.mark.parametrize(
    "entry",
    [e for e in GC_FILES if e["file"] not in COMPUTED and _asserted(e)],
    ids=lambda e: e["file"],
)
def test_figures_gcviewers_own_tests_assert(entry: dict[str, Any]) -> None:
    """Where GCViewer's tests assert a figure of the file, ours equals it."""
    figures = _asserted(entry)
    log = read_gc_log(DATA / entry["file"])
    ours = {
        "pauses": log.pauses,
        "total_pause_s": log.total_pause_s,
        "max_pause_s": log.max_pause_s,
        "full_gcs": log.full_gcs,
        "throughput_pct": log.throughput_pct,
        "full_gc_pause_sum_s": log.full_pause_s,
        "gc_pause_sum_s": log.total_pause_s - log.full_pause_s - log.safepoint_s,
        "gc_pause_n": log.pauses - log.full_gcs - log.safepoint_pauses,
        "vm_operation_pause_n": log.safepoint_pauses,
    }
    for name, value in figures.items():
        tolerance = POINTS if name.endswith("_pct") else SECONDS
        if isinstance(value, int) and name.endswith(("_n", "pauses", "gcs")):
            assert ours[name] == value, name
        else:
            assert ours[name] == pytest.approx(value, abs=tolerance), name


def test_every_file_is_in_the_table_byte_exact() -> None:
    listed = {e["file"] for e in ORACLES}
    on_disk = {
        str(p.relative_to(DATA))
        for p in DATA.rglob("*")
        if p.is_file() and p.name not in ("README.md", "NOTES.md", "oracles.json")
    }
    assert listed == on_disk
    for entry in ORACLES:
        digest = hashlib.sha256((DATA / entry["file"]).read_bytes()).hexdigest()
        assert digest == entry["sha256"], entry["file"]
        assert entry["file"] in (DATA / "README.md").read_text()


def test_each_gc_file_is_told_a_gc_log_of_its_kind() -> None:
    for entry in GC_FILES:
        (source,) = open_sources([str(DATA / entry["file"])])
        source.close()
        unified = entry["format"].startswith("unified")
        assert source.kind == ("unified-gc" if unified else "jdk8-gc"), entry["file"]
