from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.builders import meta, steps
from traindoctor.errors import RecordCorruptError, RecordError
from traindoctor.model import ConcurrencyStat, RunEnd
from traindoctor.record import RecordWriter, load_run


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
    with pytest.raises(RecordCorruptError, match="upgrade traindoctor"):
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
