"""The flight recorder probe: entries read as collectives (an entry as torch 2.13 recorded it
for a gloo all-reduce), read at half the launcher's stall, nothing without a process group."""

from __future__ import annotations

from stepdoctor.probes import flight

#: ``_dump_fr_trace_json()["entries"][-1]`` of a 2-rank gloo job (torch 2.13, CPU).
ENTRY = {
    "collective_seq_id": 9, "input_dtypes": ["Float"], "input_sizes": [[2]], "is_p2p": False,
    "op_id": 9, "output_dtypes": ["Float"], "output_sizes": [[2]], "p2p_seq_id": 0, "pg_id": 0,
    "process_group": ["0", "default_pg"], "profiling_name": "gloo:all_reduce", "record_id": 8,
    "retired": True, "state": "scheduled", "thread_id": "140558325037952",
    "thread_name": "python", "time_created_ns": 1795683180352014511,
    "time_discovered_completed_ns": 0, "time_discovered_started_ns": 0, "timeout_ms": 1800000,
}  # fmt: skip


def test_an_entry_is_read_as_a_collective() -> None:
    c = flight._collective(ENTRY)
    assert c is not None and (c.seq, c.op, c.state) == (9, "gloo:all_reduce", "scheduled")
    assert c.sizes == "float32[2]" and c.group == "0 (default_pg)"
    subgroup = flight._collective({**ENTRY, "process_group": ["3", "undefined"]})
    assert subgroup is not None and subgroup.group == "3"  # groups made without a name
    assert c.created_unix_ns == 1795683180352014511
    assert flight._collective({"profiling_name": "x"}) is None  # no number: not matched
    assert flight._collective("garbage") is None


def test_a_rank_reads_its_recorder_at_half_the_launchers_stall() -> None:
    assert flight.read_after_s({flight.STALL_VARIABLE: "3"}) == 1.5
    assert flight.read_after_s({flight.STALL_VARIABLE: "nonsense"}) == 60.0
    assert flight.read_after_s({flight.STALL_VARIABLE: "inf"}) == 60.0
    assert flight.read_after_s({}) == flight.STALL_AFTER_S * flight.READ_SHARE


def test_no_process_group_means_no_collectives() -> None:
    assert flight.last() == []
