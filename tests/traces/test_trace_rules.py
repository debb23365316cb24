"""Trace rules on the shared real traces, and on built rank analyses for the cases the shared
traces do not have (launch-bound, a dominating kernel)."""

from __future__ import annotations

import pytest

from stepdoctor.cli.trace import trace_findings
from stepdoctor.model import (
    Finding,
    KernelStat,
    LaunchStats,
    RankTrace,
    RunRecord,
    Severity,
    TemporalBreakdown,
    TraceSummary,
)
from stepdoctor.rules import RuleContext, run_rules
from stepdoctor.traces import analyse_paths
from tests.builders import meta
from tests.traces.test_oracle import TRACES

shared = pytest.mark.skipif(not TRACES.exists(), reason="shared/traces is not available here")


def _rules(case: str) -> dict[str, list[Severity]]:
    found: dict[str, list[Severity]] = {}
    for f in trace_findings(analyse_paths([TRACES / case])):
        found.setdefault(f.rule, []).append(f.severity)
    return found


@shared
def test_real_traces_get_the_findings_their_numbers_call_for() -> None:
    a100 = _rules("hta_a100_80gb_r0of16")  # idle 69.44%, NCCL 13% of GPU time, 1.37% hidden
    assert a100 == {"gpu-idle": [Severity.CRITICAL], "comm-bound": [Severity.WARNING]}
    assert _rules("hta_trace_diff_v100_r1of2") == {"h2d-bound": [Severity.WARNING]}
    assert _rules("hta_v100_single") == {}  # a busy GPU: nothing to say
    dlrm = _rules("param_dlrm_v100_8rank")  # 8 ranks, uneven
    assert {"stragglers", "sync-bound", "comm-bound", "gpu-idle"} <= set(dlrm)


@shared
def test_the_straggler_is_the_rank_that_waits_least_in_collectives() -> None:
    """DLRM on 8 V100s: ranks 1 and 3 have the most GPU time, all of the excess spent in
    NCCL kernels waiting; rank 7 waits least (1.7 ms against the others' 6.3 ms) with the
    same computation as the others: the others wait for rank 7, whose host side is late."""
    (found,) = [f for f in trace_findings(analyse_paths([TRACES / "param_dlrm_v100_8rank"]))
                if f.rule == "stragglers"]  # fmt: skip
    assert found.ranks == (7,)
    assert found.title.startswith("Rank 7 holds back 7 other ranks: 27% of their GPU time")
    assert "host side" in found.explanation and "rank 7's process" in found.fix.summary
    lost = next(e for e in found.evidence if e.metric == "other ranks' GPU time lost waiting")
    assert 0.2 < lost.value < 0.35


def _comm_rank(rank: int, comm: int, compute: int, kernel_time: int = 10_000) -> RankTrace:
    idle = kernel_time - comm - compute
    return _rank(
        rank=rank,
        temporal=TemporalBreakdown(
            kernel_time_us=kernel_time, idle_us=idle, compute_us=compute,
            non_compute_us=comm, idle_pct=100 * idle / kernel_time,
            compute_pct=100 * compute / kernel_time, non_compute_pct=100 * comm / kernel_time,
        ),
        type_us=(("COMMUNICATION", comm), ("COMPUTATION", compute)),
    )  # fmt: skip


def test_stragglers_by_least_wait_with_the_cause_on_that_rank() -> None:
    # Rank 2's GPU computes 1.5x as long: the others wait 3 ms of 10 in their NCCL kernels.
    gpu = _find(_comm_rank(0, 4000, 4000), _comm_rank(1, 4100, 4000), _comm_rank(2, 1000, 6000),
                _comm_rank(3, 3900, 4000))  # fmt: skip
    found = gpu["stragglers"]
    assert isinstance(found, Finding) and found.ranks == (2,)
    assert "1.50x as long" in found.explanation and "nvidia-smi" in (found.fix.snippet or "")
    assert found.speedup.factor == pytest.approx(1 / (1 - 0.3))
    # The same computation everywhere, rank 1 launching late: its host side.
    host = _find(_comm_rank(0, 4000, 4000), _comm_rank(1, 500, 4000), _comm_rank(2, 4200, 4000))
    late = host["stragglers"]
    assert isinstance(late, Finding) and late.ranks == (1,) and "host side" in late.explanation
    # Ranks that wait alike (noise of a few percent): nobody holds the others back.
    even = _find(_comm_rank(0, 4000, 4000), _comm_rank(1, 3800, 4100), _comm_rank(2, 4100, 4000))
    assert "stragglers" not in even
    # The rank with the most kernel time is not named for it: its excess is waiting.
    waiting = _find(_comm_rank(0, 9000, 4000, 16_000), _comm_rank(1, 8800, 4000, 16_000),
                    _comm_rank(2, 2000, 4000, 9_000))  # fmt: skip
    assert isinstance(waiting["stragglers"], Finding) and waiting["stragglers"].ranks == (2,)
    # No collectives at all: no rank waits for another.
    assert "stragglers" not in _find(_comm_rank(0, 0, 4000), _comm_rank(1, 0, 6000))


def test_both_nccl_kernel_namings_are_communication() -> None:
    from stepdoctor.traces.analysis import COMMUNICATION, kernel_type

    assert kernel_type("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)") == COMMUNICATION
    assert (
        kernel_type("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)")
        == COMMUNICATION
    )
    assert kernel_type("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)") == COMMUNICATION
    assert kernel_type("nccl_something_else") != COMMUNICATION


def _rank(**kw: object) -> RankTrace:
    fields: dict[str, object] = {
        "rank": 0,
        "path": "r0.json",
        "device": None,
        "steps_kept": (),
        "events": 10,
        "gpu_events": 10,
        "temporal": TemporalBreakdown(
            kernel_time_us=1000,
            idle_us=100,
            compute_us=900,
            non_compute_us=0,
            idle_pct=10.0,
            compute_pct=90.0,
            non_compute_pct=0.0,
        ),
        "comm_comp_overlap_pct": None,
    }
    fields.update(kw)
    return RankTrace(**fields)  # type: ignore[arg-type]


def _find(*ranks: RankTrace) -> dict[str, RankTrace | object]:
    ctx = RuleContext(RunRecord(meta=meta()), trace=TraceSummary(ranks=ranks))
    findings, _ = run_rules(ctx, scopes=("trace",))
    return {f.rule: f for f in findings}


def test_launch_bound_and_hot_kernel_on_built_analyses() -> None:
    launches = LaunchStats(launches=1000, cpu_median_us=8.0, gpu_median_us=3.0,
                           delay_median_us=2.0, short_kernels=800, runtime_outliers=0,
                           delay_outliers=0)  # fmt: skip
    hot = KernelStat(name="sgemm", kernel_type="COMPUTATION", sum_us=600, count=10,
                     share_pct=60.0)  # fmt: skip
    found = _find(_rank(launch=launches, launch_cpu_us=8000, launch_gpu_us=3000, kernels=(hot,)))
    assert set(found) == {"launch-bound", "hot-kernel"}
    busy = _rank(launch=launches, launch_cpu_us=8000, launch_gpu_us=9000)
    assert "launch-bound" not in _find(busy)  # the GPU work outweighs the launches


def test_no_trace_means_the_trace_rules_are_skipped() -> None:
    findings, skipped = run_rules(RuleContext(RunRecord(meta=meta())), scopes=("trace",))
    assert findings == [] and {s.reason for s in skipped} == {"no profiler trace with GPU events"}


def test_rank_list_is_compact() -> None:
    from stepdoctor.rules._traces import rank_list

    assert rank_list([5, 0, 1, 2, 3, 7, 8]) == "0-3, 5, 7, 8"
    assert rank_list([4]) == "4"


@shared
def test_findings_of_many_ranks_come_once_per_rule_and_severity() -> None:
    findings = trace_findings(analyse_paths([TRACES / "param_dlrm_v100_8rank"]))
    keys = [(f.rule, f.severity) for f in findings]
    assert len(keys) == len(set(keys))  # no rule repeats at one severity
    idle = [f for f in findings if f.rule == "gpu-idle"]
    covered = sorted(r for f in idle for r in f.ranks)
    assert covered == sorted(set(covered)) and len(covered) >= 2
    grouped = next(f for f in idle if len(f.ranks) > 1)
    assert grouped.title.startswith("Ranks ")
    assert "(worst: " in grouped.title
    assert any(e.metric == "ranks affected" and e.value == len(grouped.ranks)
               for e in grouped.evidence)  # fmt: skip
    # The worst rank's numbers stand for the group: one finding per rank before grouping.
    from stepdoctor.rules.gpu_idle import gpu_idle

    trace = analyse_paths([TRACES / "param_dlrm_v100_8rank"])
    per_rank = [f for f in gpu_idle(RuleContext(_record(), trace=trace))
                if f.severity == grouped.severity]  # fmt: skip
    assert sorted(r for f in per_rank for (r,) in [f.ranks]) == list(grouped.ranks)
    assert grouped.speedup.factor == max(f.speedup.factor for f in per_rank)


def _record() -> RunRecord:
    return RunRecord(meta=meta())
