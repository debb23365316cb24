"""The GC log parsers' C fast path (``logs/_gcscan.c``) against the pure-Python parsers, the
reference: the same figures, to the last bit, on every GC log of the corpus, on large logs
that thin the timeline, on lines cut and corrupted anywhere, and whatever the chunks the file
is read in.

``make test`` sets ``STEPDOCTOR_REQUIRE_C_PARTS=1``: there the fast path must have been built.
"""

from __future__ import annotations

import gzip
import io
import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stepdoctor.logs import feed, read_gc_log, read_logs
from stepdoctor.logs.feed import fast_path
from stepdoctor.logs.gc_jdk8 import parse_jdk8
from stepdoctor.logs.gc_stats import KEPT_PAUSES
from tests.logs._readers import read_both
from tests.shared_data import LOGS as DATA
from tests.shared_data import needs

ORACLE_FILE = DATA / "oracles.json"
ORACLES = json.loads(ORACLE_FILE.read_text()) if ORACLE_FILE.exists() else []
corpus = needs(ORACLE_FILE)
GC_FILES = sorted(DATA / e["file"] for e in ORACLES if e["file"].startswith("gc/"))
REQUIRED = os.environ.get("STEPDOCTOR_REQUIRE_C_PARTS", "") == "1"


@pytest.fixture(autouse=True)
def _built() -> None:
    if fast_path() is None:
        assert not REQUIRED, "STEPDOCTOR_REQUIRE_C_PARTS=1 but logs/_gcscan is not built"
        pytest.skip("the C fast path is not built (or STEPDOCTOR_PURE_PYTHON is set)")


@corpus
@pytest.mark.parametrize("path", GC_FILES, ids=lambda p: p.name)
def test_every_corpus_log_reads_the_same_through_the_fast_path(path: Path) -> None:
    data = path.read_bytes()
    fast, pure, fed = read_both(data)
    assert fast == pure
    assert fed.handed <= fast.lines == pure.lines


@corpus
def test_the_fast_path_takes_most_lines_of_logs_of_each_family() -> None:
    """Not a path that never runs: of G1's logs (JDK 8 -verbose:gc, unified -Xlog:gc*) it
    takes most lines (of JDK 8 logs, after the first 1000 events), the parser reading the
    rest."""
    for name in ("SampleSun1_6_0G1_gc_verbose.txt", "sample-ujl-g1-gc-all,safepoint,os+cpu.txt"):
        data = (DATA / "gc" / "gcviewer" / name).read_bytes()
        fast, pure, fed = read_both(data)
        assert fast == pure
        assert fed.handed < fast.lines / 3, (name, fed.handed, fast.lines)


@pytest.mark.no_cover
@corpus
def test_a_large_log_thins_its_timeline_alike() -> None:
    """Past KEPT_PAUSES the timeline keeps every other pause, the longest stay whole: the
    same ones either way (the log repeated end to end, its clock starting over each time)."""
    data = (DATA / "gc" / "gcviewer" / "SampleSun1_6_0G1_gc_verbose.txt").read_bytes()
    big = data * 12
    fast, pure, _ = read_both(big)
    assert fast.pauses > KEPT_PAUSES and fast.pause_stride >= 2
    assert fast == pure


def test_many_causes_and_kinds_alike() -> None:
    """More (kind, cause) pairs than the fast path keeps at hand (it writes them back and
    reads them again): the lines of a real log, their causes renamed one by one."""
    line = "{t}: [GC (Cause {i}) 262144K->2136K(1005056K), 0.0036093 secs]\n"
    full = "{t}: [Full GC (Cause {i})  2136K->1950K(1005056K), 0.0240000 secs]\n"
    data = "".join(
        (full if i % 7 == 0 else line).format(t=f"{i * 0.5:.3f}", i=i % 40) for i in range(3000)
    ).encode()
    fast, pure, fed = read_both(data, "jdk8")
    assert fast == pure and len(fast.causes) == 80  # 40 causes, young and full
    assert fed.handed < 1100  # the first 1000 events are the parser's (the collector's)


@corpus
@pytest.mark.parametrize("chunk", [1, 7, 4096])
def test_chunks_of_any_size_read_alike(monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    monkeypatch.setattr(feed, "CHUNK_BYTES", chunk)
    for name in ("sample-ujl-g1-gc-all,safepoint,os+cpu.txt", "SampleSun1_6_0G1_gc_verbose.txt"):
        data = (DATA / "gc" / "gcviewer" / name).read_bytes()[:60_000]
        fast, pure, _ = read_both(data)
        assert fast == pure


@corpus
def test_the_last_line_without_its_end_and_crlf_lines_read_alike() -> None:
    data = (DATA / "gc" / "gcviewer" / "SampleSun1_6_0G1_gc_verbose.txt").read_bytes()
    crlf = data.replace(b"\n", b"\r\n")
    for variant in (data.rstrip(b"\n"), crlf, crlf.rstrip(b"\n")):
        fast, pure, _ = read_both(variant)
        assert fast == pure


# Lines of every kind the fast path takes, from the corpus: the mutations below cut into them.
_SEEDS = [
    "0.356: [GC pause (young) 4096K->3936K(16M), 0.0121737 secs]",
    "12.345: [GC (Allocation Failure)  262144K->2136K(1005056K), 0.0036093 secs]",
    "3.1: #12: [Full GC (System.gc())  2136K->1950K(1005056K), 0,0240000 secs]",
    "2.473: [Full GC (System) 2.473: [CMS: 0K->1146K(1048576K), 0.0517710 secs] "
    "27526K->1146K(1992320K), [CMS Perm : 10723K->10719K(21248K)], 0.0518910 secs]",
    "2022-10-28T10:58:59.295-0400: [Pause Degenerated GC (Mark) 121M->19211K(122M), 9.421 ms]",
    "0.403: [GC concurrent-mark-end, 0.0126670 sec]",
    "[GC concurrent-mark-start]",
    "1.2: [CMS-concurrent-mark: 0.010/0.012 secs]",
    "5.0: [GC remark, 0.0012 secs]",
    "5.1: [GC cleanup 10M->10M(20M), 0.0001 secs]",
    "2.5: Total time for which application threads were stopped: 0.0001234 seconds",
    "   [Parallel Time: 1.2 ms, GC Workers: 4]",
    "2.998: [GC (System.gc()) [PSYoungGen: 26428K->4457K(154112K)] 26428K->4461K(502272K), "
    "0.0103603 secs] [Times: user=0.01 sys=0.00, real=0.01 secs] ",
    "3.008: [Full GC (System.gc()) [PSYoungGen: 4457K->0K(154112K)] [ParOldGen: 4K->4228K("
    "348160K)] 4461K->4228K(502272K), [Metaspace: 2717K->2717K(1056768K)], 0.0103 secs]",
    "2012-04-26T23:59:50.253+0200: 3.344: [GC 3.344: [ParNew: 34944K->4352K(39296K), 0.0123 "
    "secs] 34944K->8765K(126720K), 0.0124 secs] [Times: user=0.03 sys=0.00, real=0.01 secs]",
    "2012-04-26T23:59:51.001-0700: [GC (Allocation Failure) [DefNew: 4K->1K(9K), 0,001 secs]"
    "[Tenured: 8K->9K(20K), 0,002 secs] 12K->10K(29K), [Perm : 2K->2K(21K)], 0,003 secs]",
    "1.5: [GC[YG occupancy: 2 K (4 K)]1.5: [GC 1.5: [ParNew: 3K->1K(4K), 0.002 secs] 5K->3K("
    "9K), 0.002 secs]1.5: [Rescan (parallel) , 0.001 secs][1 CMS-remark: 2K(5K)] 3K(9K), 0.004 "
    "secs]",
    "4.0: [GC (CMS Initial Mark) [1 CMS-initial-mark: 2K(5K)] 3K(9K), 0.0002 secs]",
    "4.1: [GC (Allocation Failure) 4.1: [ParNew (promotion failed): 3K->3K(4K), 0.01 secs]4.1: "
    "[CMS: 8K->6K(10K), 0.05 secs] 11K->6K(14K), [Metaspace: 2K->2K(9K)], 0.06 secs]",
    "5.5: [GC pause (G1 Evacuation Pause) (young) (to-space exhausted), 0.0120 secs]",
    # a collection over several lines (G1's ergonomics, the tenuring distribution), from
    # GCViewer's SampleSun1_8_0G1_ConcurrentCycle.txt and ...PrintTenuringDistribution.txt
    "0.290: [GC pause (G1 Evacuation Pause) (young) (initial-mark) 0.290: [G1Ergonomics (CSet "
    "Construction) start choosing CSet, _pending_cards: 512, predicted base time: 2.55 ms]\n"
    " 0.290: [G1Ergonomics (CSet Construction) add young regions to CSet, eden: 15 regions]\n"
    " 0.301: [G1Ergonomics (Heap Sizing) expand the heap, requested expansion amount: 6710886 "
    "bytes, attempted expansion amount: 7340032 bytes]\n, 0.0115587 secs]\n"
    "   [Parallel Time: 11.2 ms, GC Workers: 4]",
    "26.214: [GC pause (G1 Evacuation Pause) (young)\nDesired survivor size 1342177280 bytes, "
    "new threshold 15 (max 15)\n, 16.7578613 secs]",
    # another thread's concurrent phase cut into a collection (SampleSun1_6_0G1_gc_verbose.txt)
    "0.388: [GC pause (young) (initial-mark) 10080K->10080K(16M)0.390: [GC concurrent-mark-start]"
    "\n, 0.0013065 secs]",
    "4.853: [GC pause (young)4.853: [GC concurrent-mark-start]\n 150M->150M(256M), 0.0136 secs]",
    "2012-04-26T23:59:50.253+0200: 5.0: [GC pause (young)2012-04-26T23:59:50.300+0200: 5.1: "
    "[GC concurrent-mark-end, 0.0126670 secs]\n 150M->150M(256M), 0.0136 secs]",
    "[2020-06-24T18:13:47.695-0700][173690ms] GC(75) Pause Young (Normal) (G1 Evacuation Pause) "
    "9M->4M(64M) 1.8ms",
    "[2020-06-24T18:13:47.700-0700] GC(76) Pause Young (Normal) (G1 Evacuation Pause) 1.8ms",
    "[2020-06-24T18:13:48.700-0700][info][safepoint] Total time for which application threads "
    "were stopped: 0.0038 seconds",
    "[0.303s][info][gc           ] GC(7) Pause Young (G1 Evacuation Pause) 90M->90M(128M) 3.819ms",
    "[0.303s][info][gc] GC(8) Pause Young (Normal) (G1 Evacuation Pause) 9M->4M(64M) 1.8ms",
    "[1,475s][info][gc] GC(0) Pause Full (System.gc()) 887M->583M(1223M) 3460,196ms",
    "[173690ms] GC(3) Pause Remark 10M->10M(20M) 1.234ms",
    "[0.303s][info][gc,metaspace ] GC(7) Metaspace: 3647K->3647K(1056768K)",
    "[0.298s][info][gc,marking   ] GC(6) Concurrent Scan Root Regions 0.092ms",
    "[0.298s][info][gc,marking   ] GC(6) Concurrent Mark (0.298s, 0.312s) 14.087ms",
    "[0.298s][info][gc           ] GC(6) Concurrent Cycle",
    "[0.298s][info][gc,start     ] GC(6) Concurrent Mark Cycle",
    "[0.3s][safepoint] Total time for which application threads were stopped: 0.0038 seconds",
    "[2020-06-24T18:13:47.695-0700][173690ms] GC(74) Pause Full (System.gc()) 887M->583M(1G) 3.1ms",
    "[0.303s][info][gc,phases    ] GC(7)   Evacuate Collection Set: 3.2ms",
    "[2022-08-09T17:56:59.045-0400] GC(0) Pause Init Mark (unload classes) 0.472ms",
    "[2022-08-09T17:56:59.046-0400] GC(0) Pause Degenerated GC (Mark) 10M->5M(20M) 12.5ms",
    "[2.126s][info][gc          ] GC(33) Pause Degenerated GC (Update Refs) 91M->16M(92M) 1.2ms",
    "[2.125s][info][gc,start    ] GC(33) Pause Degenerated GC (Update Refs)",
    "[1.491s][info][gc] GC(0) Concurrent cleanup 10M->5M(20M) 0.123ms",
    "[2022-08-09T17:56:59.057-0400] GC(0) Using 2 of 6 workers for Concurrent thread roots",
    "[0.125s] GC(0) Pause Mark Start 0.004ms",
    "[0.129s][info][gc,phases] GC(0) Pause Relocate Start (Major) 0.006ms",
    "[0.3s][info][gc] GC(0) Garbage Collection (Warmup) 10M(5%)->8M(4%)",
    "[0.3s][info][gc] GC(1) Y: Pause Mark Start 0.004ms",
    "[0.918s][info][gc,start    ] GC(0) Garbage Collection (Warmup)",
    "[10.417s][info][gc,stats    ]    Critical: Allocation Stall    0.000 / 0.000    0.000 / 0.000"
    "       0.000 / 0.000       0.000 / 0.000         ms",
    "[1.2s][info][gc] Allocation Stall (main) 12.345ms",
    "",
]
_ALPHABET = st.sampled_from(
    list("[]() ,.:-+0123456789msKMGT#\t")
    + ["secs", "ms", "->", "\u00e9", "[GC ", "Perm", "CMS", "\n"]
)


@settings(deadline=None)
@given(
    picks=st.lists(st.integers(0, len(_SEEDS) - 1), min_size=1, max_size=40),
    edits=st.lists(
        st.tuples(st.integers(0, 39), st.floats(0, 1), st.integers(0, 3), _ALPHABET),
        max_size=12,
    ),
    family=st.sampled_from(["jdk8", "unified"]),
    prefix=st.one_of(st.just(1000), st.integers(0, 1200)),
)
@pytest.mark.no_cover
def test_mutated_lines_read_alike(
    picks: list[int], edits: list[tuple[int, float, int, str]], family: str, prefix: int
) -> None:
    """Lines the fast path takes, with characters inserted, deleted or replaced anywhere:
    whatever each becomes, the fast path takes it as the parser would, or leaves it to it.
    ``prefix`` one-line collections first, so that JDK 8 events reach the fast path."""
    lines = [_SEEDS[i] for i in picks]
    for which, where, how, text in edits:
        line = lines[which % len(lines)]
        at = int(len(line) * where)
        if how == 0:
            line = line[:at] + text + line[at:]
        elif how == 1:
            line = line[:at] + line[at + len(text) :]
        else:
            line = line[:at] + text + line[at + len(text) :]
        lines[which % len(lines)] = line
    head = [f"{i}.0: [GC (Allocation Failure)  4K->2K(8K), 0.001 secs]" for i in range(prefix)]
    data = "\n".join(head + lines).encode()
    fast, pure, _ = read_both(data, family)
    assert fast == pure


@corpus
def test_a_cut_gz_read_in_chunks_keeps_what_came_before(tmp_path: Path) -> None:
    data = (DATA / "gc" / "gcviewer" / "SampleSun1_6_0G1_gc_verbose.txt").read_bytes() * 4
    whole = gzip.compress(data)
    cut = tmp_path / "gc.log.gz"
    cut.write_bytes(whole[: len(whole) * 3 // 4])
    read = read_logs([str(cut)])
    (log,) = read.gc_logs
    assert any("ends early" in w for w in read.warnings)
    # the lines the cut stream gave, read by the parser alone
    with gzip.open(cut, "rb") as stream:
        got = b""
        try:
            while chunk := stream.read1(1 << 16):
                got += chunk
        except EOFError:
            pass
    lines = [raw.decode("utf-8", "replace").rstrip("\r\n") for raw in io.BytesIO(got)]
    assert log == parse_jdk8(str(cut), lines)


@corpus
def test_read_gc_log_uses_the_fast_path_and_the_pure_twin_alike(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = DATA / "gc" / "gcviewer" / "sample-ujl-g1-gc-all,safepoint,os+cpu.txt"
    fast = read_gc_log(path)
    monkeypatch.setenv("STEPDOCTOR_PURE_PYTHON", "1")
    assert fast_path() is None
    assert read_gc_log(path) == fast


_PRE = "".join(f"{i}.0: [GC (Allocation Failure)  4K->2K(8K), 0.001 secs]\n" for i in range(1000))


@pytest.mark.parametrize(
    ("family", "data"),
    [
        # a GC id past 64 bits
        ("unified", "[1.0s][info][gc] GC(99999999999999999999) Pause Young (Normal) (G1 "
                    "Evacuation Pause) 10M->5M(20M) 1.234ms\n[2.0s][info][gc] x\n"),
        # a ZGC cycle's heap whose first arrow has nothing before it
        ("unified", "[1.0s][info][gc] GC(1) Garbage Collection (Warmup) ->a->b\n[2.0s] x\n"),
        # Shenandoah's start with a bracket still open: the parser drops it
        ("jdk8", _PRE + "1000.5: [GC (Allocation Failure) [x, start]\n  foo, 0.5 secs]\nx\n"),
        # a dated line that is no event: its date is never read
        ("jdk8", _PRE + "2012-04-26T23:59:50.253+0200: 1000.5: [GC concurrent-]\nx\n"),
        # decorations with a blank between them
        ("unified", "[2020-06-24T18:13:47.695-0700] [info] hello\n[2.0s] x\n"),
        # sizes and ids past 64 bits that the parser reads, then lines the fast path would take
        ("unified", "[1.0s][info][gc] GC(1) Pause Young (Normal) (G1 Evacuation Pause) "
                    "10M->5M(9000000T) 1.0ms\n[2.0s][info][gc] x\n[3.0s][info][gc] y\n"),
        ("unified", "GC(99999999999999999999) Pause Young (Normal) 10M->5M(20M) 1.0ms\n"
                    "[2.0s][info][gc] x\n[3.0s][info][gc] GC(2) Pause Young (Normal) 1.0ms\n"),
        ("jdk8", "0.5: [GC (Allocation Failure)  4K->2K(99999999999G), 0.001 secs]\nend\n"
                 + _PRE + "1000.5: [GC (a)  4K->2K(8K), 0.001 secs]\n"),
        # young collections inside a remark: their sum, added in order
        ("jdk8", _PRE + "1000.5: [GC (CMS Final Remark) [GC (a) 1K->1K(2K), 0.1 secs][GC (a) "
                        "1K->1K(2K), 0.2 secs][GC (a) 1K->1K(2K), 0.3 secs] 5K->1K(9K), 1.0 "
                        "secs]\nx\n"),
    ],
)  # fmt: skip
def test_lines_found_in_review_read_alike(family: str, data: str) -> None:
    fast, pure, _ = read_both(data.encode(), family)
    assert fast == pure


def test_an_uninitialised_scanner_says_so() -> None:
    part = fast_path()
    with pytest.raises(TypeError):
        part.Scanner.__new__(part.Scanner).scan(b"x\n", 0)
