"""Fuzzing the trace loader and everything after it (hypothesis).

Whatever bytes a file holds, ``stepdoctor trace`` ends in one of two ways: a ``TraceError``
(one line naming the file) or an analysis that renders, ranks findings and writes JSON. Inputs
that once broke that are kept in ``fuzz_corpus/`` and replayed by the last test.

The test command runs 100 examples of each (hypothesis profile "ci", tests/conftest.py); a
longer hunt: ``HYPOTHESIS_PROFILE=hunt pytest tests/traces/test_fuzz.py`` (10,000 each).
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stepdoctor.cli.trace import trace_findings
from stepdoctor.errors import TraceError
from stepdoctor.render.trace import render_trace, summary_to_dict
from stepdoctor.traces import analyse_paths

CORPUS = Path(__file__).parent / "fuzz_corpus"

#: Values a hostile or broken writer could put anywhere.
anything = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([1e308, -1e308, 1e-320, 0.5, 1e19])
    | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=6,
)
CATEGORIES = ["kernel", "Kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver",
              "cuda_sync", "cpu_op", "user_annotation", "Runtime", "Memcpy",
              "python_function"]  # fmt: skip
NAMES = ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#x", "cudaLaunchKernel",
         "cudaStreamSynchronize", "ncclKernel_AllReduce", "Memcpy HtoD (Pinned -> Device)",
         "Memset (Device)", "volta_sgemm", "<script>alert(1)</script>", ""]  # fmt: skip
small = st.integers(min_value=-5, max_value=2000)
number = small | st.floats(min_value=-10, max_value=1e4, allow_nan=False) | anything


@st.composite
def event(draw: st.DrawFn) -> object:
    """A trace event: mostly shaped like Kineto's, with any field possibly odd."""
    if draw(st.integers(0, 9)) == 0:
        return draw(anything)  # not even an object
    ev: dict[str, object] = {
        "ph": draw(st.sampled_from(["X", "X", "X", "i", "M", 3])),
        "cat": draw(st.sampled_from(CATEGORIES) | anything),
        "name": draw(st.sampled_from(NAMES) | anything),
        "ts": draw(number),
        "dur": draw(number),
    }
    if draw(st.booleans()):
        ev["args"] = draw(
            st.fixed_dictionaries(
                {"stream": st.sampled_from([7, 20, 7.0]) | anything,
                 "correlation": small | anything},
            ) | anything
        )  # fmt: skip
    if draw(st.booleans()):
        ev["tid"] = draw(small | anything)
    return ev


@st.composite
def trace_document(draw: st.DrawFn) -> bytes:
    doc: dict[str, object] = {}
    if draw(st.booleans()):
        doc["distributedInfo"] = {"rank": draw(small | anything)}
    if draw(st.booleans()):
        doc["deviceProperties"] = draw(st.lists(st.fixed_dictionaries({"name": anything})))
    doc["traceEvents"] = draw(st.lists(event(), max_size=25) | anything)
    text = json.dumps(doc)
    return text.encode()


@st.composite
def mangled(draw: st.DrawFn) -> bytes:
    """A well-formed document, then cut, overwritten or gzipped (and maybe cut again)."""
    data = draw(trace_document())
    op = draw(st.sampled_from(["keep", "cut", "flip", "gzip", "gzip-cut", "latin1"]))
    if op == "cut":
        data = data[: draw(st.integers(0, len(data)))]
    elif op == "flip" and data:
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1 :]
    elif op.startswith("gzip"):
        data = gzip.compress(data)
        if op == "gzip-cut":
            data = data[: draw(st.integers(0, len(data)))]
    elif op == "latin1":
        data = data.replace(b'"', b'"\xe9', 1)
    return data


@st.composite
def plausible_rank(draw: st.DrawFn, rank: int) -> bytes:
    """A rank's trace that is well formed and mostly plausible: kernels, memcpys and NCCL on
    a few streams, each launched by a runtime call with a matching correlation, some
    synchronisations, ProfilerStep markers; sizes and times drawn freely (zero, negative,
    overlapping, out of order)."""
    events: list[dict[str, object]] = []
    t = st.integers(min_value=-50, max_value=5000)
    for step in range(draw(st.integers(0, 4))):
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}",
                       "ts": draw(t), "dur": draw(t)})  # fmt: skip
    for corr in range(draw(st.integers(0, 30))):
        launch_ts = draw(t)
        events.append({"ph": "X", "cat": "cuda_runtime",
                       "name": draw(st.sampled_from(["cudaLaunchKernel", "cudaMemcpyAsync",
                                                     "cudaStreamSynchronize"])),
                       "ts": launch_ts, "dur": draw(t), "args": {"correlation": corr}})  # fmt: skip
        if draw(st.integers(0, 5)):
            events.append({"ph": "X",
                           "cat": draw(st.sampled_from(["kernel", "gpu_memcpy", "cuda_sync"])),
                           "name": draw(st.sampled_from(NAMES)),
                           "ts": launch_ts + draw(t) // 4,
                           "dur": draw(t | st.floats(min_value=0, max_value=500)),
                           "args": {"stream": draw(st.sampled_from([7, 13, 20])),
                                    "correlation": corr}})  # fmt: skip
    draw(st.randoms()).shuffle(events)
    doc = {"distributedInfo": {"rank": rank}, "deviceProperties": [{"name": "A100"}],
           "traceEvents": events}  # fmt: skip
    return json.dumps(doc).encode()


@pytest.mark.no_cover
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), ranks=st.integers(1, 3), same_rank=st.booleans())
def test_plausible_multi_rank_traces_analyse(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, ranks: int, same_rank: bool
) -> None:
    folder = tmp_path_factory.mktemp("ranks")
    for r in range(ranks):
        doc = data.draw(plausible_rank(0 if same_rank else r))
        (folder / f"rank{r}.json").write_bytes(doc)
    check_file(folder)


def check_file(path: Path) -> None:
    """The property: a TraceError, or an analysis that renders, ranks and serialises."""
    try:
        summary = analyse_paths([path])
    except TraceError as exc:
        message = str(exc)
        assert "\n" not in message and str(path) in message
        return
    findings = trace_findings(summary)
    render_trace(summary)
    text = json.dumps(summary_to_dict(summary, findings), allow_nan=False)
    assert "traceback" not in text.lower()
    for rank in summary.ranks:
        if rank.temporal is not None:
            assert math.isfinite(rank.temporal.idle_pct)


@pytest.mark.no_cover
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=mangled())
def test_any_bytes_give_an_analysis_or_one_line(tmp_path_factory: pytest.TempPathFactory,
                                                data: bytes) -> None:  # fmt: skip
    path = tmp_path_factory.mktemp("fuzz") / "rank0.json"
    path.write_bytes(data)
    check_file(path)


@pytest.mark.parametrize("path", sorted(CORPUS.glob("*")), ids=lambda p: p.name)
def test_corpus_of_former_crashers(path: Path) -> None:
    check_file(path)
