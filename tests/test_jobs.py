"""A distributed job's diagnosis from its ranks: the rank the others wait for (least wait in
the all-reduces), its cause from its own phases, and silence when the ranks wait alike."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from stepdoctor.jobs import (
    CRITICAL_WAIT_SHARE,
    MIN_CRITICAL_STEPS,
    RankRow,
    comm_findings,
    hang_findings,
    job_findings,
    job_report,
    rank_findings,
    rank_record,
    rank_rows,
    summarise_job,
)
from stepdoctor.model import (
    Collective,
    DdpStats,
    Finding,
    Fix,
    Report,
    RunEnd,
    RunRecord,
    Severity,
    Speedup,
)
from stepdoctor.record import RecordWriter
from stepdoctor.render.job import JOB_HEADING, RANKS_HEADING, render_job_as, render_job_report
from stepdoctor.report import build_report
from tests.builders import meta, record, samples, stacked, steps
from tests.marks import needs_module


def _row(rank: int, comm: float, step: float = 20.0, steps_: int = 200, **phases: float) -> RankRow:
    base = {"data_wait": 1.0, "forward": 4.0, "backward_compute": 6.0, "other": 0.5, "gc": 0.0}
    return RankRow(rank=rank, host="h", steps=steps_, mean_step_ms=step, samples_per_sec=None,
                   data_wait_share=None, comm_ms=comm, phase_ms={**base, **phases})  # fmt: skip


def test_the_rank_that_waits_least_is_named_with_its_slow_phase() -> None:
    rows = [_row(0, 9.0), _row(1, 1.0, data_wait=9.0), _row(2, 8.8), _row(3, 9.2)]
    (f,) = job_findings(rows)
    assert f.rule == "stragglers" and f.ranks == (1,)
    assert f.title == "Rank 1 holds back 3 other ranks: 40% of each step lost waiting"
    assert f.severity == Severity.CRITICAL  # 40% of the step, 200 steps
    assert "its data loading: 9.0 ms a step against the others' 1.0 ms" in f.explanation
    assert "shard" in f.fix.summary
    assert f.speedup.factor == 1 / (1 - 0.4)


def test_a_slow_callback_or_computation_is_the_cause_where_it_is() -> None:
    (f,) = job_findings([_row(0, 6.0), _row(1, 1.0, other=5.0)])
    assert f.ranks == (1,) and "work between its phases" in f.explanation
    assert f.title == "Rank 1 holds back the other rank: 25% of each step lost waiting"
    (g,) = job_findings([_row(0, 8.0), _row(1, 1.0, backward_compute=13.0)])
    assert g.ranks == (1,) and "its backward computation" in g.explanation


def test_ranks_that_wait_alike_are_not_compared_into_a_straggler() -> None:
    # 8% apart, no phase that explains it: the spread of DDP's few timed iterations
    assert job_findings([_row(0, 3.0, step=3.7), _row(1, 2.7, step=3.7)]) == []
    # an unexplained gap of a fifth of the step or more: named, the whole step slower
    (f,) = job_findings([_row(0, 6.0), _row(1, 1.0)])
    assert "none of its phases stands out" in f.explanation
    assert job_findings([_row(0, 5.0)]) == []  # one rank
    assert job_findings([_row(0, 5.0), dataclasses.replace(_row(1, 1.0), comm_ms=None)]) == []


def test_no_critical_from_a_short_run() -> None:
    rows = [_row(0, 9.0, steps_=MIN_CRITICAL_STEPS - 1), _row(1, 1.0, data_wait=9.0)]
    (f,) = job_findings(rows)
    assert CRITICAL_WAIT_SHARE <= (9.0 - 1.0) / 20.0 and f.severity == Severity.WARNING


def test_rows_take_the_phases_from_the_report_and_the_wait_from_ddp() -> None:
    s = steps(50, phases_ms={"data_wait": 2, "forward": 3, "backward": 5})
    stats = DdpStats(model="Net", iterations=100, backward_compute_ns=4_000_000,
                     backward_comm_ns=1_500_000)  # fmt: skip
    rec = dataclasses.replace(record(s), ddp=(stats,))
    (row,) = rank_rows({3: rec}, {3: build_report(rec)})
    assert row.rank == 3 and row.comm_ms == 1.5 and row.phase_ms["backward_compute"] == 4.0
    assert row.mean_step_ms is not None and abs(row.phase_ms["data_wait"] - 2.0) < 0.01


def _ranked(phases: dict[str, list[tuple[tuple[str, ...], int]]], end: RunEnd | None) -> RunRecord:
    rec = stacked(record(steps(20, phases_ms={"forward": 5, "backward": 5})), phases,
                  library=("Event.wait",))  # fmt: skip
    return dataclasses.replace(rec, end=end)


def _rows(records: dict[int, RunRecord]) -> list[RankRow]:
    return rank_rows(records, {rank: build_report(r) for rank, r in records.items()})


def test_a_rank_that_stopped_while_the_others_waited_is_named_with_its_stack() -> None:
    waited = _ranked({"forward": [(("main", "fwd"), 5)], "backward": [(("main", "bwd"), 20)]},
                     RunEnd(t_ns=1, status="exception", exit_code=1,
                            error="RuntimeError: Timed out waiting 4000ms"))  # fmt: skip
    stuck = _ranked({"forward": [(("main", "fwd"), 5)],
                     "other": [(("main", "wait_for_reply", "Event.wait"), 20)]}, None)  # fmt: skip
    (f,) = hang_findings(_rows({0: waited, 1: stuck}))
    assert f.rule == "hang" and f.ranks == (1,) and f.severity == Severity.CRITICAL
    assert f.title == "Rank 1 stopped stepping; rank(s) 0 waited for it"
    assert "wait_for_reply (/job/train.py:" in f.explanation and "in Event.wait" in f.explanation
    assert "the process was stopped" in f.explanation and "Timed out" in f.explanation
    assert any(e.value == "main > wait_for_reply > Event.wait" for e in f.evidence)
    # every rank ended well: no hang; every rank outside the waiting phases: none named
    done = RunEnd(t_ns=1, status="ok")
    assert hang_findings(_rows({0: dataclasses.replace(waited, end=done),
                                1: dataclasses.replace(stuck, end=done)})) == []  # fmt: skip
    assert hang_findings(_rows({0: stuck, 1: dataclasses.replace(stuck, end=None)})) == []


def _job_folder(job: Path, slow_rank: int) -> None:
    """A job of three ranks written as their records: ``slow_rank`` waits least, for data."""
    for rank in range(3):
        slow = rank == slow_rank
        w = RecordWriter(job / f"rank-{rank}", dataclasses.replace(meta(), rank=rank, world_size=3))
        w.write_items("steps", steps(60, phases_ms={"data_wait": 9 if slow else 1,
                                                    "forward": 4, "backward": 10}))  # fmt: skip
        comm = 1_000_000 if slow else 9_000_000
        w.write_items("ddp", [DdpStats(model="Net", iterations=59, backward_compute_ns=4_000_000,
                                       backward_comm_ns=comm)])  # fmt: skip
        w.write_end(RunEnd(t_ns=10**10, status="ok"))
        w.close()
    (job / "rank-9").mkdir()  # a folder with no record: said, left out
    (job / "rank-9" / "run.jsonl").write_text("not json\n")


def test_a_job_with_nothing_found_says_so_under_its_own_heading(tmp_path: Path) -> None:
    for rank in range(2):
        w = RecordWriter(tmp_path / f"rank-{rank}", dataclasses.replace(meta(), rank=rank,
                                                                      world_size=2))  # fmt: skip
        w.write_items("steps", steps(60, phases_ms={"data_wait": 1, "forward": 4,
                                                    "backward": 10}))  # fmt: skip
        w.write_end(RunEnd(t_ns=10**10, status="ok"))
        w.close()
    text = render_job_report(job_report(tmp_path, executor="serial"))
    verdict = text.split(JOB_HEADING, 1)[1].split(RANKS_HEADING, 1)[0]
    assert "No problems found" in verdict


@pytest.mark.parametrize(
    "executor",
    [
        "serial",
        "process",
        pytest.param("dask", marks=needs_module("distributed", "Dask's executor")),
    ],
)
def test_the_job_is_mapped_rank_by_rank_on_any_executor(tmp_path: Path, executor: str) -> None:
    _job_folder(tmp_path, slow_rank=2)
    rows, reports, problems = summarise_job(tmp_path, executor=executor)
    assert sorted(reports) == [0, 1, 2] and reports[2].meta.rank == 2
    assert [r.rank for r in rows] == [0, 1, 2] and [r.comm_ms for r in rows] == [9.0, 9.0, 1.0]
    assert len(problems) == 1 and problems[0].startswith("rank-9: its record could not be read")
    (f,) = job_findings(rows)
    assert f.ranks == (2,) and "its data loading" in f.explanation


def test_an_unknown_executor_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="executor must be"):
        summarise_job(tmp_path, executor="threads")


def test_a_rank_slowed_where_other_processes_took_the_cores_is_info() -> None:
    # 15% of the step lost, as two healthy ranks beside two busy processes measured (16%)
    contended = dataclasses.replace(_row(1, 1.0, backward_compute=13.0), others_cpu_share=0.4)
    (f,) = job_findings([_row(0, 4.0), contended])
    assert f.severity == Severity.INFO and "Other processes used 40%" in f.explanation
    assert "not for anything of the job's" in f.explanation
    # 35% lost: beyond what sharing the host explains, other processes single it out
    (h,) = job_findings([_row(0, 8.0), contended])
    assert h.severity == Severity.CRITICAL and "one that runs on its cores" in h.explanation
    # its own slow data is the job's, whatever the machine
    slow_data = dataclasses.replace(_row(1, 1.0, data_wait=9.0), others_cpu_share=0.4)
    (g,) = job_findings([_row(0, 9.0), slow_data])
    assert g.severity != Severity.INFO


def _timed(
    rank: int,
    comm: float,
    step: float = 20.0,
    *,
    overlap: float = 0.0,
    micro: float | None = 1.0,
    steps_: int = 200,
    **settings: object,
) -> RankRow:
    ddp = DdpStats(model="Net", iterations=steps_, backward_comm_ns=int(comm * 1e6),
                   overlap_ns=int(overlap * 1e6), bucket_cap_bytes=25 * 2**20, backend="gloo",
                   **settings)  # type: ignore[arg-type]  # fmt: skip
    return dataclasses.replace(_row(rank, comm, step, steps_), ddp=ddp, micro_batches=micro)


def test_all_reduces_the_backward_does_not_hide_are_the_jobs_cost() -> None:
    rows = [_timed(0, 7.2, 12.7), _timed(1, 7.0, 12.7)]
    (f,) = comm_findings(rows)
    assert f.rule == "comm-bound" and f.severity == Severity.CRITICAL  # 55%, 200 steps
    assert f.title == "Gradient all-reduces take 55% of each step that the backward does not hide"
    assert "7.0 ms a step on rank 1, the rank that waits least" in f.explanation
    assert "bucket_cap_mb=25" in f.explanation and "comm hook none" in f.explanation
    assert "larger batch" in f.fix.summary and "bucket_cap_mb" in f.fix.summary
    assert "fp16_compress_hook" in f.fix.summary and "no_sync" in f.fix.summary
    assert "It accumulates" not in f.fix.summary  # one backward a step
    assert abs(f.speedup.factor - 1 / (1 - 7.0 / 12.7)) < 1e-9


def test_the_fixes_are_those_that_apply() -> None:
    accumulating = [_timed(0, 5.0, micro=4.0), _timed(1, 5.0, micro=4.0, comm_hook="fp16")]
    (f,) = comm_findings(accumulating)
    assert "It accumulates 4 micro-batches a step" in f.fix.summary
    assert "this is the least it costs" in f.explanation  # DDP times one backward of 4
    assert "fp16_compress_hook" in f.fix.summary  # rank 0 waits least (a tie: the lower rank)
    hooked = [_timed(0, 5.0, comm_hook="fp16_compress_hook"), _timed(1, 5.1)]
    (g,) = comm_findings(hooked)
    assert "comm hook fp16_compress_hook" in g.explanation and "compress" not in g.fix.summary
    overlapped = [_timed(0, 9.0, overlap=6.0), _timed(1, 9.0, overlap=6.0,
                                                      find_unused_parameters=True)]  # fmt: skip
    (h,) = comm_findings(overlapped)  # 3 ms of 20 exposed: 15%, warning
    assert h.severity == Severity.WARNING and "bucket_cap_mb starts" not in h.fix.summary
    (u,) = comm_findings([_timed(0, 9.0, overlap=6.0, find_unused_parameters=True),
                          _timed(1, 9.1)])  # fmt: skip
    assert "find_unused_parameters=True walks" in u.fix.summary


def test_communication_the_backward_hides_or_a_wait_for_a_straggler_is_no_comm_cost() -> None:
    assert comm_findings([_timed(0, 9.0, overlap=8.0), _timed(1, 9.0, overlap=8.0)]) == []
    # the others' all-reduces are long because they wait for rank 1; its own is short
    assert comm_findings([_timed(0, 9.0), _timed(1, 1.0), _timed(2, 9.2)]) == []
    assert comm_findings([_timed(0, 9.0)]) == []  # one rank: no all-reduce to judge
    assert comm_findings([_row(0, 9.0), _row(1, 9.0)]) == []  # no DDP timings
    short = [_timed(0, 9.0, steps_=MIN_CRITICAL_STEPS - 1), _timed(1, 9.0)]
    (f,) = comm_findings(short)
    assert f.severity == Severity.WARNING


def test_a_rank_whose_clock_is_held_down_is_named_for_its_clock() -> None:
    """Rank 1 computes 30% longer; its GPU ran at 71% of its maximum clock (power cap, heat)
    where the others ran at 98%: the clock is the cause, and no busy host makes it info."""
    fast = {"gpu_clock": 0.98}
    rows = [dataclasses.replace(_row(r, 9.0), **fast) for r in (0, 2)]
    slow = dataclasses.replace(_row(1, 1.0, forward=5.2, backward_compute=10.8), gpu_clock=0.71,
                               gpu_throttled=("software power cap", "software thermal slowdown"),
                               others_cpu_share=0.5)  # fmt: skip
    (f,) = job_findings([*rows, slow])
    assert f.ranks == (1,) and f.severity == Severity.CRITICAL
    assert "its GPU's clock: 71% of its maximum against the others' 98% (software power cap, " \
           "software thermal slowdown)" in f.explanation  # fmt: skip
    assert "nvidia-smi" in f.fix.summary
    # the host's CPUs at a lower clock: the same, in MHz
    cpu = [dataclasses.replace(_row(0, 8.0), cpu_mhz=3000.0),
           dataclasses.replace(_row(1, 1.0, backward_compute=13.0), cpu_mhz=2100.0,
                               host="h2")]  # fmt: skip
    (g,) = job_findings(cpu)
    assert "its host's CPU clock: 2100 MHz against the others' 3000 MHz" in g.explanation
    # ranks of one host share its clock: a reading apart is that clock's noise, not a cause
    (one,) = job_findings([cpu[0], dataclasses.replace(cpu[1], host="h")])
    assert "clock" not in one.explanation
    # a clock 2% lower does not explain a 40% wait: the phase that does is named
    slight = [dataclasses.replace(_row(0, 9.0), cpu_mhz=3000.0),
              dataclasses.replace(_row(1, 1.0, data_wait=9.0), cpu_mhz=2940.0)]  # fmt: skip
    (h,) = job_findings(slight)
    assert "its data loading" in h.explanation and "clock" not in h.explanation


def test_rows_read_the_ranks_clocks_from_its_samples() -> None:
    from stepdoctor.model import GpuProcess, GpuSample

    s = steps(40, phases_ms={"forward": 10})
    mine = GpuProcess(pid=1, name="python", mem_bytes=None, is_job=True)
    gpu = tuple(
        GpuSample(t_ns=x.start_ns, index=i, util_pct=90.0, sm_clock_mhz=1400 if i else 1900,
                  max_sm_clock_mhz=1980, clock_reasons=0x20 if i else 0,
                  processes=(mine,) if i == 1 else ())
        for x in s for i in (0, 1)
    ) + tuple(  # idle readings (the clock down for want of work) do not count
        GpuSample(t_ns=x.end_ns, index=1, util_pct=3.0, sm_clock_mhz=210, max_sm_clock_mhz=1980,
                  clock_reasons=0x1, processes=(mine,))
        for x in s
    )  # fmt: skip
    system = tuple(dataclasses.replace(x, cpu_mhz=2600.0) for x in samples(s))
    rec = dataclasses.replace(record(s, system=system), gpu=gpu)
    (row,) = rank_rows({0: rec}, {0: build_report(rec)})
    assert row.cpu_mhz == 2600.0  # the host's
    assert row.gpu_clock == 1400 / 1980 and row.gpu_throttled == ("software thermal slowdown",)


def test_other_processes_beside_a_slow_computation_are_named() -> None:
    """A CPU hog on the straggler's core (tests/distributed: rank 1 pinned to core 1 beside
    a busy shell there): its backward 1.5x the other's, other processes a sixth of the host."""
    hogged = dataclasses.replace(_row(1, 1.0, backward_compute=13.0), others_cpu_share=0.17,
                                 busiest_others="sh (pid 7, 49%)")  # fmt: skip
    (f,) = job_findings([_row(0, 8.0), hogged])
    assert f.severity == Severity.CRITICAL and "its backward computation" in f.explanation
    assert "used 17% of its host's CPUs meanwhile (the busiest: sh (pid 7, 49%))" in f.explanation
    assert "one that runs on its cores slows its computation" in f.explanation
    # slow data is no computation: the others on the host are not its cause
    data = dataclasses.replace(_row(1, 1.0, data_wait=9.0), others_cpu_share=0.17,
                               busiest_others="sh (pid 7, 49%)")  # fmt: skip
    (g,) = job_findings([_row(0, 9.0), data])
    assert "busiest" not in g.explanation


def _col(seq: int, op: str = "gloo:all_reduce", sizes: str = "float32[66560]") -> Collective:
    return Collective(seq=seq, op=op, state="scheduled", sizes=sizes, group="default_pg")


def test_the_flight_recorder_tells_the_rank_behind_where_the_stacks_cannot() -> None:
    """Both ranks' last samples in the backward (a rank stuck inside a collective of its own
    looks like one waiting): rank 1's last collective is #44 where rank 0 waits in #46."""
    ahead = (_col(45, sizes="float32[1059850]"), _col(46))
    rows = [
        dataclasses.replace(_row(0, 9.0), collectives=ahead, last_phase="backward", status=None),
        dataclasses.replace(
            _row(1, 9.0), collectives=(_col(43), _col(44)), last_phase="backward", status=None
        ),
    ]
    (f,) = hang_findings(rows, ended=False)
    assert f.rule == "hang" and f.ranks == (1,)
    assert "collective #46, gloo:all_reduce of float32[66560], scheduled, which rank 1 never " \
           "issued: its last was #44" in f.explanation  # fmt: skip
    assert any(e.metric == "rank 0: last collective" and str(e.value).startswith("#46")
               for e in f.evidence)  # fmt: skip
    # every rank at the same collective: nothing tells them apart
    level = [dataclasses.replace(r, collectives=(_col(46),)) for r in rows]
    assert hang_findings(level, ended=False) == []


def test_ranks_that_issued_different_collectives_are_out_of_step() -> None:
    other = (_col(7), _col(8, "gloo:broadcast", "int64[10]"))
    rows = [
        dataclasses.replace(
            _row(0, 9.0), collectives=(_col(7), _col(8)), status=None, last_phase="backward"
        ),
        dataclasses.replace(_row(1, 9.0), status=None, last_phase="other", collectives=other),
    ]
    (f,) = hang_findings(rows)
    assert f.rule == "desync" and f.severity == Severity.CRITICAL
    assert f.title == "The ranks issued different collectives as #8 of group default_pg"
    assert "rank 1: gloo:broadcast of int64[10], scheduled" in f.explanation
    assert "same collectives" in f.fix.summary
    # a job that ended well on every rank is no hang, whatever its recorder kept
    done = [dataclasses.replace(r, status="ok") for r in rows]
    assert hang_findings(done) == []


def test_where_a_rank_stayed_since_its_last_step_is_its_last_phase() -> None:
    """A rank that waited in its all-reduce until the timeout, then spent its last samples
    raising the error and shutting down: it stayed in the backward."""
    rec = stacked(record(steps(20, phases_ms={"forward": 5, "backward": 5})),
                  {"backward": [(("main", "bwd"), 20)],
                   "other": [(("main", "shutdown"), 8)]})  # fmt: skip
    end = rec.steps[-1].end_ns
    stalled = dataclasses.replace(rec, samples=tuple(
        dataclasses.replace(s, t_ns=end + 1_000_000 * (i + 1)) for i, s in enumerate(rec.samples)
    ))  # fmt: skip
    (row,) = _rows({0: stalled})
    assert row.last_phase == "backward" and row.last_where.startswith("bwd (")


def test_cpu_all_reduces_on_a_busy_host_are_said_as_info_below_critical() -> None:
    """15% exposed while other processes took 40% of the hosts' CPUs: info, saying so; at 55%
    it stays critical; with nccl (the GPUs') it stays a warning."""
    busy = [dataclasses.replace(r, others_cpu_share=0.4)
            for r in (_timed(0, 9.0, overlap=6.0), _timed(1, 9.0, overlap=6.0))]  # fmt: skip
    (f,) = comm_findings(busy)
    assert f.severity == Severity.INFO and "Other processes used 40%" in f.explanation
    heavy = [dataclasses.replace(r, others_cpu_share=0.4)
             for r in (_timed(0, 7.2, 12.7), _timed(1, 7.0, 12.7))]  # fmt: skip
    assert comm_findings(heavy)[0].severity == Severity.CRITICAL
    nccl = [dataclasses.replace(r, ddp=dataclasses.replace(r.ddp, backend="nccl")) for r in busy]
    assert comm_findings(nccl)[0].severity == Severity.WARNING


SCHEMA = Path(__file__).resolve().parents[1] / "docs" / "job-report.schema.json"


def test_a_jobs_report_leads_with_the_job_in_every_format(tmp_path: Path) -> None:
    """Rank 2 waits least, for data: the JSON (valid against its documented schema) names it
    and its cause, with the ranks' table and each rank's report; the ranks' own findings are
    labelled by rank, said once where every rank says the same; the text and the page put the
    job first."""
    jsonschema = pytest.importorskip("jsonschema")
    _job_folder(tmp_path, slow_rank=2)
    job = job_report(tmp_path, executor="serial")
    data = json.loads(render_job_as("json", job, _first(tmp_path)))
    jsonschema.validate(data, json.loads(SCHEMA.read_text()))
    section = data["job"]
    assert (data["kind"], section["world_size"], section["ranks_read"]) == ("job", 3, [0, 1, 2])
    assert section["straggler"]["rank"] == 2 and section["straggler"]["cause"] == "data_wait"
    assert section["verdict"][0]["rule"] == "stragglers" and section["hang"] is None
    assert [row["rank"] for row in section["ranks_table"]] == [0, 1, 2]
    assert section["problems"][0].startswith("rank-9: its record could not be read")
    assert [r["meta"]["rank"] for r in data["ranks"]] == [0, 1, 2]
    # every rank waits for input (info: a second of steps), said once with the figures of
    # rank 2, whose wait is the longest
    (waits,) = (f for f in section["rank_findings"] if f["rule"] == "input-bound")
    assert (waits["ranks"], waits["every_rank"], waits["figures_of"]) == ([0, 1, 2], True, 2)
    assert waits["label"] == "every rank (rank 2's figures)"
    own = {r["meta"]["rank"]: r["findings"] for r in data["ranks"]}
    assert waits["title"] == next(f["title"] for f in own[2] if f["rule"] == "input-bound")
    text = render_job_as("text", job, _first(tmp_path))
    assert text.index("Ranks") < text.index(JOB_HEADING) < text.index(RANKS_HEADING)
    assert "every rank (rank 2's figures): " in text.split(RANKS_HEADING, 1)[1]
    page = render_job_as("html", job, _first(tmp_path))
    assert page.index('id="job"') < page.index("Rank 0 in detail")
    assert page.index("Rank 2 holds back") < page.index("Rank 0 in detail")


def test_ranks_findings_are_said_once_by_the_ranks_that_make_them() -> None:
    """Four ranks: what all say is said once; what two say, once with both; what one says,
    with its rank; a rule at two severities is two findings."""

    def report(rank: int, *findings: Finding) -> Report:
        base = build_report(record(steps(30, phases_ms={"forward": 10})))
        return dataclasses.replace(
            base, meta=dataclasses.replace(base.meta, rank=rank), findings=findings
        )

    def said(rule: str, share: float, severity: Severity = Severity.WARNING) -> Finding:
        return Finding(rule=rule, severity=severity, title=f"{rule} takes {share:.0%}",
                       explanation="e", evidence=(), fix=Fix(summary="f"),
                       speedup=Speedup(factor=1 / (1 - share), basis="b"))  # fmt: skip

    reports = {
        0: report(0, said("gc-pauses", 0.1), said("input-bound", 0.3)),
        1: report(1, said("gc-pauses", 0.2), said("input-bound", 0.4)),
        2: report(2, said("gc-pauses", 0.1), said("slow-callbacks", 0.5)),
        3: report(3, said("gc-pauses", 0.1, Severity.CRITICAL)),
    }
    found = {(f.finding.rule, f.label): f for f in rank_findings(reports)}
    assert set(found) == {
        ("gc-pauses", "ranks 0, 1, 2 (rank 1's figures)"),
        ("gc-pauses", "rank 3"),
        ("input-bound", "ranks 0, 1 (rank 1's figures)"),
        ("slow-callbacks", "rank 2"),
    }
    assert found[("gc-pauses", "rank 3")].finding.severity is Severity.CRITICAL
    everyone = rank_findings({n: reports[n] for n in (0, 1)})
    assert {f.label for f in everyone} == {"every rank (rank 1's figures)"}
    assert [f.finding.title for f in everyone] == ["input-bound takes 40%", "gc-pauses takes 20%"]


def test_a_jobs_page_escapes_what_comes_from_its_records(tmp_path: Path) -> None:
    _job_folder(tmp_path, slow_rank=1)
    job = job_report(tmp_path, executor="serial")
    evil = "<script>alert(1)</script>"
    rows = tuple(dataclasses.replace(r, host=evil) for r in job.rows)
    page = render_job_as("html", dataclasses.replace(job, rows=rows, folder=evil),
                         _first(tmp_path))  # fmt: skip
    assert evil not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_report_of_a_jobs_folder_writes_the_jobs_json_and_refuses_one_ranks_formats(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from stepdoctor.cli import main

    _job_folder(tmp_path / "job", slow_rank=1)
    out = tmp_path / "job.json"
    argv = ["report", str(tmp_path / "job"), "--executor", "serial", "--format", "json"]
    assert main([*argv, "-o", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["kind"] == "job" and data["job"]["straggler"]["rank"] == 1
    assert main([*argv[:-1], "perfetto"]) == 2
    assert "its report is text, json, html" in capsys.readouterr().err


def _first(job: Path) -> RunRecord:
    first = rank_record(job)
    assert first is not None
    return first
