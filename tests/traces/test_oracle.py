"""Every shared real GPU trace against Holistic Trace Analysis 0.5.0's numbers
(shared/traces/hta_oracle.json): equal, to the microsecond and the rounded percentage."""

from __future__ import annotations

import json
import math
from functools import cache
from typing import Any

import pytest

from stepdoctor.model import TraceSummary
from stepdoctor.traces import analyse_paths
from tests.shared_data import TRACES, needs

ORACLE: list[dict[str, Any]] = (
    json.loads((TRACES / "hta_oracle.json").read_text())["results"]
    if (TRACES / "hta_oracle.json").exists()
    else []
)
CASES = [c["case"] for c in ORACLE]

pytestmark = needs(TRACES / "hta_oracle.json")


@cache
def _summary(case: str) -> TraceSummary:
    return analyse_paths([TRACES / case])


def _case(case: str) -> dict[str, Any]:
    return next(c for c in ORACLE if c["case"] == case)


@pytest.mark.parametrize("case", CASES)
def test_temporal_breakdown_and_steps_kept(case: str) -> None:
    oracle = _case(case)
    ranks = {r.rank: r for r in _summary(case).ranks}
    assert sorted(ranks) == oracle["ranks"]
    for row in oracle["temporal_breakdown"]:
        t = ranks[row["rank"]].temporal
        assert t is not None
        assert (t.kernel_time_us, t.idle_us, t.compute_us, t.non_compute_us) == (
            row["kernel_time(us)"],
            row["idle_time(us)"],
            row["compute_time(us)"],
            row["non_compute_time(us)"],
        )
        assert (t.idle_pct, t.compute_pct, t.non_compute_pct) == (
            row["idle_time_pctg"],
            row["compute_time_pctg"],
            row["non_compute_time_pctg"],
        )
    kept = sorted({s for r in ranks.values() for s in r.steps_kept})
    assert kept == oracle["profiler_steps_kept"]


@pytest.mark.parametrize("case", CASES)
def test_comm_comp_overlap(case: str) -> None:
    ranks = {r.rank: r for r in _summary(case).ranks}
    for row in _case(case)["comm_comp_overlap"]:
        expected = row["comp_comm_overlap_pctg"]
        mine = ranks[row["rank"]].comm_comp_overlap_pct
        if expected is None or (isinstance(expected, float) and math.isnan(expected)):
            assert mine is None
        else:
            assert mine == expected


@pytest.mark.parametrize("case", CASES)
def test_every_kernel_sum_and_type(case: str) -> None:
    ranks = {r.rank: r for r in _summary(case).ranks}
    for row in _case(case)["kernel_breakdown_full"]:
        kernels = {k.name: k for k in ranks[row["rank"]].kernels}
        k = kernels[row["name"]]
        assert (k.sum_us, k.kernel_type) == (row["sum (us)"], row["kernel_type"]), row["name"]
    for rank, top in _case(case)["top_kernels"].items():
        mine = ranks[int(rank)].kernels
        assert sum(k.sum_us for k in mine) == top["total_kernel_sum_us"]
        # Same sums and shares in the same order (names of equal sums may come in either order).
        for k, row in zip(mine, top["top"], strict=False):
            assert (k.sum_us, k.share_pct) == (row["sum_us"], row["share_pct"])


@pytest.mark.parametrize("case", CASES)
def test_kernel_type_overlap_table(case: str) -> None:
    # HTA sorts the sweep's edges with an unstable sort, so at equal timestamps it may pass
    # through zero-length states ("COMPUTATION overlapping MEMORY 0 us"): rows of 0 µs are
    # left out of ours; every other row is equal, µs and rounded percentage.
    expected = [
        (r["kernel_type"], r["sum"], r["percentage"])
        for r in _case(case)["kernel_type_breakdown"]
        if r["sum"]
    ]
    assert sorted(_summary(case).kernel_type_table()) == sorted(expected)


@pytest.mark.parametrize("case", CASES)
def test_launch_statistics(case: str) -> None:
    ranks = {r.rank: r for r in _summary(case).ranks}
    for rank, row in _case(case)["cuda_kernel_launch_stats"].items():
        stats = ranks[int(rank)].launch
        if row["n"] == 0:
            assert stats is None
            continue
        assert stats is not None
        assert (
            stats.launches,
            stats.short_kernels,
            stats.runtime_outliers,
            stats.delay_outliers,
            stats.cpu_median_us,
            stats.gpu_median_us,
            stats.delay_median_us,
        ) == (
            row["n"],
            row["n_short_gpu_kernels(cpu_dur<=50us&gpu_dur<cpu_dur)"],
            row["n_runtime_outliers(cpu_dur>50us)"],
            row["n_launch_delay_outliers(delay>100us)"],
            row["cpu_duration_median"],
            row["gpu_duration_median"],
            row["launch_delay_median"],
        )


@pytest.mark.parametrize("case", CASES)
def test_idle_time_breakdown_per_stream(case: str) -> None:
    ranks = {r.rank: r for r in _summary(case).ranks}
    expected: dict[tuple[int, int], dict[str, int]] = {}
    for row in _case(case)["idle_time_breakdown"]:
        expected.setdefault((row["rank"], row["stream"]), {})[row["idle_category"]] = row[
            "idle_time"
        ]
    for (rank, stream), cats in expected.items():
        s = {x.stream: x for x in ranks[rank].idle_by_stream}[stream]
        mine = {"host_wait": s.host_wait_us, "kernel_wait": s.kernel_wait_us, "other": s.other_us}
        assert {c: mine[c] for c in cats} == cats, (rank, stream)
