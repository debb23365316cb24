from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from stepdoctor.errors import RecordCorruptError, RecordError
from stepdoctor.model import (
    SCHEMA_VERSION,
    ConcurrencyStat,
    GpuSample,
    Notice,
    ProcessUsage,
    RunEnd,
    StepTiming,
    SystemSample,
    to_jsonable,
)
from stepdoctor.record import RecordWriter, load_run
from stepdoctor.record.rows import STEP_FIELDS, step_rows_json
from tests.builders import meta, steps


def _write(tmp_path: Path, *, end: bool = True) -> Path:
    w = RecordWriter(tmp_path, meta())
    w.write_items("steps", steps(3, phases_ms={"forward": 1}))
    w.write_items("steps", steps(2, phases_ms={"forward": 2}))
    for calls in (1, 5):
        w.write_items(
            "concurrency",
            [
                ConcurrencyStat(
                    model_id=1,
                    class_name="N",
                    calls=calls,
                    threads=1,
                    max_concurrent=1,
                    concurrent_calls=0,
                )
            ],
        )
    if end:
        w.write_end(RunEnd(t_ns=10, status="ok"))
    w.close()
    return w.path


def test_round_trip(tmp_path: Path) -> None:
    path = _write(tmp_path)
    rec = load_run(tmp_path)
    assert rec.meta == meta()
    assert len(rec.steps) == 5
    assert rec.concurrency[0].calls == 5  # the last concurrency line replaces earlier ones
    assert rec.end == RunEnd(t_ns=10, status="ok")
    assert rec.warnings == ()
    assert load_run(path) == rec


def test_truncated_last_line_loads_with_a_warning(tmp_path: Path) -> None:
    path = _write(tmp_path, end=False)
    data = path.read_bytes()
    path.write_bytes(data[:-25])
    rec = load_run(path)
    assert len(rec.steps) == 5
    assert any("truncated last line at byte" in w for w in rec.warnings)
    assert any("no end line" in w for w in rec.warnings)


def test_corrupt_middle_line_is_skipped_and_named(tmp_path: Path) -> None:
    path = _write(tmp_path)
    lines = path.read_bytes().split(b"\n")
    offset = len(lines[0]) + 1
    lines[1] = b'{"type": "steps", "items": [{"index": "x"}]}'
    path.write_bytes(b"\n".join(lines))
    rec = load_run(path)
    assert len(rec.steps) == 2
    assert any(f"corrupt line 2 at byte {offset}" in w for w in rec.warnings)


def test_unusable_header_fails_with_file_and_offset(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    path.write_text("garbage\n")
    with pytest.raises(RecordCorruptError, match=r"run.jsonl: corrupt run record at byte 0"):
        load_run(path)
    path.write_text(json.dumps({"type": "header", "schema_version": 99, "meta": {}}))
    with pytest.raises(RecordCorruptError, match="upgrade stepdoctor"):
        load_run(path)
    path.write_bytes(b"")
    with pytest.raises(RecordCorruptError, match="empty"):
        load_run(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(RecordError, match="cannot read run record"):
        load_run(tmp_path / "nope.jsonl")


def test_writer_refuses_unknown_line_types(tmp_path: Path) -> None:
    w = RecordWriter(tmp_path, meta())
    with pytest.raises(ValueError, match="unknown record line type"):
        w.write_items("bogus", [1])
    w.close()
    w.write_items("steps", steps(1, phases_ms={"forward": 1}))  # ignored after close
    assert len(load_run(tmp_path).steps) == 0


def test_steps_and_samples_are_rows_and_load_as_written(tmp_path: Path) -> None:
    written = steps(4, phases_ms={"forward": 1, "data_wait": 0.5}, gc_ms=0.2)
    sample = SystemSample(
        t_ns=5,
        cpu_pct_per_core=(12.5, 0.0),
        top_others=(ProcessUsage(pid=3, name="spinner", cpu_pct=75.0),),
    )
    gpu = GpuSample(t_ns=6, index=0, util_pct=50.0, mem_used_bytes=2**30)
    w = RecordWriter(tmp_path, meta())
    w.write_items("steps", written)
    w.write_items("system", [sample])
    w.write_items("gpu", [gpu])
    w.write_items("notice", [Notice(t_ns=1, level="info", message="hi")])
    w.close()
    lines = [json.loads(line) for line in w.path.read_text().splitlines()]
    assert lines[0]["schema_version"] == SCHEMA_VERSION == 3
    first = lines[1]
    assert set(first) == {"type", "fields", "rows"} and first["fields"][:3] == [
        "index",
        "start_ns",
        "end_ns",
    ]
    assert first["rows"][1][:4] == [1, written[1].start_ns, written[1].end_ns, "optimizer"]
    assert "rows" in lines[2] and "rows" in lines[3] and "items" in lines[4]
    rec = load_run(tmp_path)
    assert rec.steps == written
    assert rec.system == (sample,) and rec.gpu == (gpu,)
    assert [n.message for n in rec.notices] == ["hi"]


@pytest.mark.parametrize(
    "phase",
    ["forward", "vorwärts 前向", 'quote " and \\ and\nnewline', "lone \ud800 surrogate"],
)
def test_step_lines_read_back_as_json_would_write_them(tmp_path: Path, phase: str) -> None:
    # Step lines are encoded with orjson, the rest with json: the same values either way, and
    # a name orjson cannot encode (a lone surrogate) falls back to json.
    written = (
        *steps(2, phases_ms={phase: 1, "data_wait": 0.5}),
        StepTiming(index=2, start_ns=2**63, end_ns=2**66, boundary="model"),  # > 64 bits
    )
    w = RecordWriter(tmp_path, meta())
    w.write_items("steps", written[:2])
    w.write_items("steps", written[2:])
    w.close()
    # the same steps as rows the reducer encoded
    encoded = RecordWriter(tmp_path / "rows", meta())
    encoded.write_rows("steps", STEP_FIELDS, step_rows_json(written[:2]))
    encoded.write_rows("steps", STEP_FIELDS, step_rows_json(written[2:]))
    encoded.write_rows("steps", STEP_FIELDS, b"")  # nothing: no line
    encoded.close()
    names = [f.name for f in dataclasses.fields(StepTiming)]
    for writer in (w, encoded):
        _, first, second = writer.path.read_bytes().splitlines()
        for line, items in ((first, written[:2]), (second, written[2:])):
            rows = [[to_jsonable(getattr(step, n)) for n in names] for step in items]
            assert json.loads(line) == {"type": "steps", "fields": names, "rows": rows}
        assert load_run(writer.path).steps == written
    with pytest.raises(ValueError, match="not a record line type held as rows"):
        encoded.write_rows("notice", STEP_FIELDS, b"[1]")


def test_a_version_1_record_with_items_still_loads(tmp_path: Path) -> None:
    written = steps(2, phases_ms={"forward": 1})
    path = tmp_path / "run.jsonl"
    header = {"type": "header", "schema_version": 1, "meta": to_jsonable(meta())}
    items = {"type": "steps", "items": to_jsonable(written)}
    path.write_text(json.dumps(header) + "\n" + json.dumps(items) + "\n")
    rec = load_run(path)
    assert rec.steps == written
    assert rec.warnings == (f"{path}: no end line: the job was killed or is still running; "
                            "the record holds what was flushed up to then",)  # fmt: skip


@pytest.mark.parametrize(
    "line",
    [
        {"type": "steps", "fields": ["index", "start_ns"], "rows": [[0, 1, 2]]},  # too long
        {"type": "steps", "fields": "index", "rows": []},
        {"type": "steps", "fields": [1, 2], "rows": []},
        {"type": "steps", "fields": ["index"], "rows": {"0": 1}},
        {"type": "steps", "items": "not a list"},
        {"type": "steps", "fields": ["index", "start_ns", "end_ns"], "rows": [[0, 1, 2]]},
    ],
)
def test_malformed_rows_are_skipped_and_named(tmp_path: Path, line: object) -> None:
    path = _write(tmp_path)
    lines = path.read_bytes().split(b"\n")
    offset = len(lines[0]) + 1
    lines[1] = json.dumps(line).encode()
    path.write_bytes(b"\n".join(lines))
    rec = load_run(path)
    assert len(rec.steps) == 2  # the other steps line
    assert any(f"corrupt line 2 at byte {offset}" in w for w in rec.warnings)
