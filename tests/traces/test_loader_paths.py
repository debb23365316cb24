"""The loader's two ways (a file read whole with only the wanted events parsed, or every event
streamed through ijson) give the same events, on every shared real trace and on fuzzed ones."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from tests.traces.test_fuzz import mangled, plausible_rank
from tests.traces.test_oracle import CASES, TRACES
from traindoctor.errors import TraceError
from traindoctor.traces import load_events, trace_files
from traindoctor.traces.loader import RankEvents


def kept(r: RankEvents, *, count: bool = True) -> tuple[object, ...]:
    """What the analyses use; ``count``: with the number of events (read whole, it is the
    number of ``"ph"`` keys, equal to the objects parsed on real traces, not on odd ones)."""
    return (r.rank, r.world_size, r.device, r.gpu, r.launches, r.steps) + (
        (r.events,) if count else ()
    )


@pytest.mark.skipif(not CASES, reason="shared/traces is not available here")
@pytest.mark.parametrize("case", CASES)
def test_both_ways_agree_on_real_traces(case: str) -> None:
    for path in trace_files([TRACES / case]):
        assert kept(load_events(path, whole=True)) == kept(load_events(path, whole=False))


def _both(path: Path) -> tuple[object, object]:
    results = []
    for whole in (True, False):
        try:
            results.append(kept(load_events(path, whole=whole), count=False))
        except TraceError:
            results.append("error")
    return results[0], results[1]


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=mangled())
def test_both_ways_agree_on_fuzzed_files(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    path = tmp_path_factory.mktemp("paths") / "rank0.json"
    path.write_bytes(data)
    whole, streamed = _both(path)
    # Reading whole skips the CPU ops unparsed: a file broken only there still loads that
    # way. Wherever both load, they agree.
    if whole != "error" and streamed != "error":
        assert whole == streamed


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=plausible_rank(0))
def test_both_ways_agree_on_plausible_traces(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    path = tmp_path_factory.mktemp("paths") / "rank0.json"
    path.write_bytes(data)
    whole, streamed = _both(path)
    assert whole == streamed
