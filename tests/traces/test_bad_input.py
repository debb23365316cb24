"""Broken trace files give one line naming the file (and the byte offset where known); the
CLI prints it and exits 1, never a traceback."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from stepdoctor.cli import main
from stepdoctor.cli.trace import trace_findings
from stepdoctor.errors import TraceError
from stepdoctor.traces import analyse_paths, load_events
from tests.traces.test_oracle import TRACES

EVENTS = {
    "traceEvents": [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 10, "dur": 5,
         "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 20, "dur": 30,
         "args": {"stream": 7, "correlation": 1}},
    ]
}  # fmt: skip


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_empty_missing_invalid_truncated_and_non_utf8(tmp_path: Path) -> None:
    cases = {
        "empty.json": b"",
        "invalid.json": b'{"traceEvents": [{"ph": "X", "ts": 1,,}]}',
        "latin1.json": b'{"traceEvents": [{"name": "caf\xe9"}]}',
        "notrace.json": b'{"schemaVersion": 1}',
    }
    for name, data in cases.items():
        with pytest.raises(TraceError) as err:
            load_events(_write(tmp_path / name, data))
        assert str(err.value).startswith(str(tmp_path / name)), name
    good = gzip.compress(json.dumps(EVENTS).encode())
    truncated = _write(tmp_path / "cut.json.gz", good[: len(good) // 2])
    with pytest.raises(TraceError, match=r"truncated or corrupt gzip|invalid JSON"):
        load_events(truncated)
    with pytest.raises(TraceError, match="no such file"):
        analyse_paths([tmp_path / "missing.json"])


def test_a_trace_without_gpu_events_is_reported_honestly(tmp_path: Path) -> None:
    cpu_only = {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1,
                                 "dur": 2}]}  # fmt: skip
    summary = analyse_paths([_write(tmp_path / "cpu.json", json.dumps(cpu_only).encode())])
    (rank,) = summary.ranks
    assert rank.temporal is None and rank.gpu_events == 0
    assert any("no GPU events" in w for w in summary.warnings)


def test_ns_resolution_times_follow_htas_rounding(tmp_path: Path) -> None:
    ns = json.loads(json.dumps(EVENTS))
    ns["traceEvents"][1].update(ts=20.4, dur=30.3)  # start ceil(20.4)=21, end floor(50.7)=50
    (rank,) = analyse_paths([_write(tmp_path / "ns.json", json.dumps(ns).encode())]).ranks
    assert rank.temporal is not None and rank.temporal.kernel_time_us == 29


def test_cli_one_line_error_and_json_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = _write(tmp_path / "bad.json.gz", b"\x1f\x8bnot really gzip")
    assert main(["trace", str(bad)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("stepdoctor: error: ") and str(bad) in err[0]
    if not (TRACES / "hta_nccl_a100_r0of2").exists():
        pytest.skip("shared/traces is not available here")
    out = tmp_path / "trace.json"
    assert main(["trace", str(TRACES / "hta_nccl_a100_r0of2"), "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    (rank,) = data["ranks"]
    assert set(rank["temporal_breakdown"]) >= {
        "kernel_time_us", "idle_us", "compute_us", "non_compute_us",
        "idle_pct", "compute_pct", "non_compute_pct",
    }  # fmt: skip
    assert rank["rank"] == 0 and rank["comm_comp_overlap_pct"] == 14.31
    # HTA's kernel-type table for this trace (shared/traces/README.md), zero rows left out.
    assert [(k["kernel_type"], k["sum_us"]) for k in data["kernel_type_breakdown"]] == [
        ("COMPUTATION", 71696), ("COMMUNICATION", 20621),
        ("COMPUTATION overlapping COMMUNICATION", 3473), ("MEMORY", 831),
        ("COMMUNICATION overlapping MEMORY", 184),
    ]  # fmt: skip
    assert [f["rule"] for f in data["findings"]] == ["gpu-idle"]  # idle 77.78%
    assert data["findings"][0]["estimated_speedup"] > 1
    capsys.readouterr()
    assert main(["trace", str(TRACES / "hta_nccl_a100_r0of2")]) == 0
    text = capsys.readouterr().out  # a GPU trace: every table
    for table in ("Temporal breakdown", "rank 0: top kernels", "rank 0: idle time by stream"):
        assert table in text


def test_files_of_different_jobs_are_named_and_not_compared(tmp_path: Path) -> None:
    def rank_file(name: str, rank: int, world: int, start: int) -> None:
        events = []
        for i in range(20):
            ts = start + i * 100
            events.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaLaunchKernel",
                    "ts": ts,
                    "dur": 5,
                    "args": {"correlation": i},
                }
            )
            compute = 20 * (1 + 3 * rank)
            events.append({"ph": "X", "cat": "kernel", "name": "volta_sgemm",
                           "ts": ts + 10, "dur": compute,
                           "args": {"stream": 7, "correlation": i}})  # fmt: skip
            # the all-reduce ends when the slowest rank (compute 80 us) joins it
            events.append({"ph": "X", "cat": "kernel",
                           "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                           "ts": ts + 10 + compute, "dur": max(5, 85 - compute),
                           "args": {"stream": 9, "correlation": 1000 + i}})  # fmt: skip
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel",
                           "ts": ts + 6, "dur": 2,
                           "args": {"correlation": 1000 + i}})  # fmt: skip
        doc = {"distributedInfo": {"rank": rank, "world_size": world}, "traceEvents": events}
        (tmp_path / name).write_text(json.dumps(doc))

    # Two ranks of one 2-rank job, profiled together: rank 1 is 4x slower, a straggler.
    rank_file("a0.json", 0, 2, 1_700_000_000_000_000)
    rank_file("a1.json", 1, 2, 1_700_000_000_000_050)
    one_job = analyse_paths([tmp_path / "a0.json", tmp_path / "a1.json"])
    assert not one_job.mixed_jobs and not one_job.warnings
    stragglers = [f for f in trace_findings(one_job) if f.rule == "stragglers"]
    assert [f.ranks for f in stragglers] == [(1,)]  # it waits least in the all-reduce
    # The same files beside a rank of a job profiled 90 s later: said, and not compared.
    rank_file("b1.json", 2, 2, 1_700_000_000_000_000 + 90_000_000)
    mixed = analyse_paths([tmp_path / "a0.json", tmp_path / "a1.json", tmp_path / "b1.json"])
    assert mixed.mixed_jobs
    assert any("do not overlap in time" in w and "ranks 0, 1 / ranks 2" in w
               for w in mixed.warnings)  # fmt: skip
    assert any("3 files for a job of world_size 2" in w for w in mixed.warnings)
    assert "stragglers" not in {f.rule for f in trace_findings(mixed)}
    # World sizes that differ are another job, whatever the times say.
    rank_file("c1.json", 1, 8, 1_700_000_000_000_050)
    sizes = analyse_paths([tmp_path / "a0.json", tmp_path / "c1.json"])
    assert sizes.mixed_jobs and any("world_size 2, 8" in w for w in sizes.warnings)
