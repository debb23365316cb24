"""The loader's ways of reading a file give the same events, on every shared real trace and on
fuzzed files: streaming with ijson (the reference, and the only way with no C part), the C
scanner (``traces/_scan.c``, the default where it was built) and simdjson parsing the file
whole (``fast=True``, when pysimdjson is installed).

``make test`` sets ``STEPDOCTOR_REQUIRE_C_PARTS=1``: there the C scanner must have been built.
"""

from __future__ import annotations

import contextlib
import gzip
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stepdoctor.errors import TraceError
from stepdoctor.native import PURE_PYTHON_ENV
from stepdoctor.traces import load_events, trace_files
from stepdoctor.traces.loader import RankEvents, native_scanner
from tests.traces.test_fuzz import mangled, plausible_rank
from tests.traces.test_oracle import CASES, TRACES

try:
    import simdjson
except ImportError:
    simdjson = None

REQUIRED = os.environ.get("STEPDOCTOR_REQUIRE_C_PARTS", "") == "1"
WAYS = [
    pytest.param(
        "native",
        marks=pytest.mark.skipif(
            native_scanner() is None and not REQUIRED, reason="the C scanner was not built"
        ),
    ),
    pytest.param(
        "fast",
        marks=pytest.mark.skipif(simdjson is None, reason="pysimdjson (the [fast] extra) missing"),
    ),
]


@contextlib.contextmanager
def streaming() -> Iterator[None]:
    """Read with ijson only (the C scanner switched off)."""
    before = os.environ.get(PURE_PYTHON_ENV)
    os.environ[PURE_PYTHON_ENV] = "1"
    try:
        yield
    finally:
        if before is None:
            del os.environ[PURE_PYTHON_ENV]
        else:
            os.environ[PURE_PYTHON_ENV] = before


def kept(r: RankEvents) -> tuple[object, ...]:
    return (r.rank, r.world_size, r.device, r.gpu, r.launches, r.steps, r.events,
            r.odd_events, r.first_ts, r.warnings)  # fmt: skip


def load(path: Path, way: str) -> object:
    """What ``way`` makes of the file: its events, or the error's message."""
    try:
        if way == "stream":
            with streaming():
                return kept(load_events(path))
        if way == "fast":
            with streaming():  # simdjson, or ijson for what simdjson refuses
                return kept(load_events(path, fast=True))
        assert native_scanner() is not None, "the C scanner is not built"
        return kept(load_events(path))
    except TraceError as exc:
        return f"error: {exc}"


@pytest.mark.skipif(not CASES, reason="shared/traces is not available here")
@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("case", CASES)
def test_every_way_agrees_on_real_traces(case: str, way: str) -> None:
    for path in trace_files([TRACES / case]):
        assert load(path, way) == load(path, "stream")


@pytest.mark.skipif(not CASES, reason="shared/traces is not available here")
@pytest.mark.parametrize("way", WAYS)
def test_every_way_agrees_on_real_traces_cut_anywhere(way: str, tmp_path: Path) -> None:
    """A real trace cut at many places, inside every kind of token: the same events, or the
    same one-line error."""
    (path,) = trace_files([TRACES / "hta_amd_mi250_tiny"])
    with gzip.open(path) as f:
        whole = f.read()
    cut = tmp_path / "cut.json"
    for end in range(1, len(whole), max(1, len(whole) // 300)):
        cut.write_bytes(whole[:end])
        assert load(cut, way) == load(cut, "stream"), end


def _mismatch_allowed(way: str, streamed: object) -> bool:
    # ijson's parser stops at integers beyond 64-bit signed ("integer overflow"), valid JSON
    # that simdjson reads (up to 64-bit unsigned); the C scanner refuses them as ijson does.
    return way == "fast" and isinstance(streamed, str) and "integer overflow" in streamed


def _agrees_with_the_stream(factory: pytest.TempPathFactory, data: bytes, way: str) -> None:
    if (way == "native" and native_scanner() is None and not REQUIRED) or (
        way == "fast" and simdjson is None
    ):
        return
    path = factory.mktemp("paths") / "rank0.json"
    path.write_bytes(data)
    streamed = load(path, "stream")
    if not _mismatch_allowed(way, streamed):
        assert load(path, way) == streamed


@pytest.mark.no_cover
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=mangled(), way=st.sampled_from([p.values[0] for p in WAYS]))
def test_every_way_agrees_on_fuzzed_files(
    tmp_path_factory: pytest.TempPathFactory, data: bytes, way: str
) -> None:
    _agrees_with_the_stream(tmp_path_factory, data, way)


@pytest.mark.no_cover
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=plausible_rank(0), way=st.sampled_from([p.values[0] for p in WAYS]))
def test_every_way_agrees_on_plausible_traces(
    tmp_path_factory: pytest.TempPathFactory, data: bytes, way: str
) -> None:
    _agrees_with_the_stream(tmp_path_factory, data, way)


STEP = b'{"ph": "X", "name": "ProfilerStep#1", "ts": 1, "dur": 1}'
ODD_DOCUMENTS = [
    b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k\\u0041", "ts": 1, "dur": 2,'
    b' "args": {"stream": 7, "correlation": 3}}]}',  # an escaped name: the Python way
    b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "a", "name": "b", "ts": 1,'
    b' "dur": 2, "tid": 7}]}',  # a repeated key: the last one
    b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": null, "ts": 1, "dur": 2,'
    b' "tid": 7}]}',  # str(None)
    b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1.5, "dur": 2.25,'
    b' "tid": 7.9, "args": {"correlation": 4.7}}]}',  # floats: ceil, floor, int()
    b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1e300, "dur": 1,'
    b' "tid": 7}]}',  # beyond 64 bits once rounded: the Python way
    b'{"traceEvents": [{"ph": "X", "cat": "cuda_runtime", "name": "launch", "ts": 5,'
    b' "dur": 1, "args": {"correlation": 3}}, {"ph": "X", "cat": "Trace", "name": "t",'
    b' "ts": 0, "dur": 9}, 7, [], "x"]}',  # a launch, a Trace span, items that are not events
    b'{"traceEvents": [{"ph": "X", "name": "ProfilerStep#4", "ts": 10, "dur": 5,'
    b' "args": "not an object"}]}',
    b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2,'
    b' "tid": 9223372036854775807}]}',
    b'{"traceEvents": [{"a": -9223372036854775808}]}',  # ijson: integer overflow
    b'{"traceEvents": [{"a": 1e400}]}',  # ijson: floating point overflow
    b'{"traceEvents": [{"a": "\\ud800x"}]}',  # a lone surrogate escape
    b'{"traceEvents": [{"a": "\xed\xa0\x80"}]}',  # a surrogate in UTF-8: not UTF-8
    # surrogate escapes as ijson's yajl decodes them: a lone low one is refused, a high one
    # takes any \u escape after it, a high one alone is "?" (found by the fuzzer)
    b'{"traceEvents": [{"a": "x\\udc00"}]}',
    b'{"traceEvents": [{"a": "\\ud800\\u0041\\udc00"}]}',
    b'{"traceEvents": [{"a": "\\ud800\\n\\udfff"}]}',
    b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k\\udbff\\udfff", "ts": 1,'
    b' "dur": 2, "tid": 7}]}',
    b'\xef\xbb\xbf{"traceEvents": []}',  # a byte-order mark
    b'{"traceEvents":\x0b[' + STEP + b"]}",  # yajl takes \v and \f as whitespace: the
    b'{"traceEvents":\x0c[' + STEP + b"]}",  # scanner hands such files to the stream
    b'{"trace\\u0045vents": [{"ph": "X", "name": "ProfilerStep#1", "ts": 1, "dur": 1}]}',
    b'{"traceEvents": [{"ph": "X", "name": "ProfilerStep#1", "ts": 1}], "traceEvents":'
    b' [{"ph": "X", "name": "ProfilerStep#2", "ts": 2}]}',  # two arrays: both read
    b'{"traceEvents": {"not": "an array"}}',
    b'[{"ph": "X"}]',
    b'{"traceEvents": [{"ph": "X", "name": "ProfilerStep#1", "ts": 01}]}',
    b'{"traceEvents": [{"ph": "X", "name": "ProfilerStep#1", "ts": 1}]} trailing',
    b'{"traceEvents": [{"ph": "X", "name": "ProfilerStep#1", "ts": 1}]}  \n',
    b'{"traceEvents": [' + b"[" * 600 + b"]" * 600 + b"]}",  # deeper than the scanner goes
    # the header: repeated keys, a container as a name, numbers as ijson gives them
    b'{"distributedInfo": {"rank": 1, "rank": "x", "world_size": 2.0}, "deviceProperties":'
    b' [{"id": 0}, {"name": {"a": 1}}, {"name": "B"}], "traceEvents": [' + STEP + b"]}",
    b'{"distributedInfo": {"rank": true, "world_size": 8}, "deviceProperties": [{"name":'
    b' 1.50}], "deviceProperties": [{"name": "later"}], "traceEvents": [' + STEP + b"]}",
    b'{"deviceProperties": [{"name": "A\\u0042"}], "traceEvents": [' + STEP + b"]}",
    b'{"traceEvents": [' + STEP + b'], "distributedInfo": {"rank": 3}}',  # after: not read
    b'{"distributedInfo": [{"rank": 3}], "traceEvents": [' + STEP + b"]}",
]


@pytest.mark.parametrize("data", ODD_DOCUMENTS, ids=range(len(ODD_DOCUMENTS)))
def test_the_c_scanner_agrees_on_odd_documents(data: bytes, tmp_path: Path) -> None:
    if native_scanner() is None and not REQUIRED:
        pytest.skip("the C scanner was not built")
    path = tmp_path / "rank0.json"
    path.write_bytes(data)
    assert load(path, "native") == load(path, "stream")


@pytest.mark.skipif(not CASES, reason="shared/traces is not available here")
def test_trace_fast_flag_gives_the_same_analysis(tmp_path: Path) -> None:
    import json

    from stepdoctor.cli import main

    case = TRACES / "param_dlrm_v100_8rank"
    outs = []
    for flags in ([], ["--fast"]):
        out = tmp_path / f"t{len(flags)}.json"
        assert main(["trace", str(case), "--json", str(out), *flags]) == 0
        outs.append(json.loads(out.read_text()))
    assert outs[0] == outs[1]


@pytest.mark.skipif(not CASES, reason="shared/traces is not available here")
@pytest.mark.parametrize("chunk", [1, 7, 4096])
def test_the_c_scanner_gives_the_same_events_whatever_the_chunks(
    chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunk boundaries fall inside every kind of token; units cut by one start again."""
    if native_scanner() is None and not REQUIRED:
        pytest.skip("the C scanner was not built")
    (path,) = trace_files([TRACES / "hta_amd_mi250_tiny"])
    whole = load(path, "native")
    monkeypatch.setattr("stepdoctor.traces.loader.SCAN_CHUNK_BYTES", chunk)
    assert load(path, "native") == whole == load(path, "stream")


def test_an_event_ijson_refuses_sends_the_file_to_the_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Should ijson ever refuse an event the scanner took, the stream reads the file and has
    the last word (here it takes the file, so its events come back, not a traceback)."""
    if native_scanner() is None and not REQUIRED:
        pytest.skip("the C scanner was not built")
    import ijson

    path = tmp_path / "rank0.json"
    path.write_bytes(ODD_DOCUMENTS[0])  # an escaped name: handed to ijson by the scanner
    items = ijson.items
    handed: list[bytes] = []

    def refusing(source: object, prefix: str, **kwargs: object) -> object:
        if isinstance(source, bytes):
            handed.append(source)
            raise ijson.JSONError("refused")
        return items(source, prefix, **kwargs)

    monkeypatch.setattr(ijson, "items", refusing)
    assert load(path, "native") == load(path, "stream")
    assert handed  # the scanner did hand the event over


CORPUS = sorted((Path(__file__).parent / "fuzz_corpus").iterdir())


@pytest.mark.parametrize("path", CORPUS, ids=[p.name for p in CORPUS])
def test_the_c_scanner_agrees_on_the_fuzz_corpus(path: Path) -> None:
    if native_scanner() is None and not REQUIRED:
        pytest.skip("the C scanner was not built")
    assert load(path, "native") == load(path, "stream")
