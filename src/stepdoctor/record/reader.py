"""Tolerant run-record reader: loads what it can and says what it could not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from stepdoctor.errors import RecordCorruptError, RecordError
from stepdoctor.model import (
    SCHEMA_VERSION,
    RunEnd,
    RunMeta,
    RunRecord,
    SchemaError,
    from_jsonable,
)
from stepdoctor.record.format import ITEM_TYPES, RECORD_FILENAME, REPLACING_TYPES

__all__ = ["load_run", "record_path"]


def record_path(path: Path | str) -> Path:
    """Return the record file for ``path``: the file itself, or ``path/run.jsonl``."""
    path = Path(path)
    return path / RECORD_FILENAME if path.is_dir() else path


def load_run(path: Path | str) -> RunRecord:
    """Load a run record (a ``run.jsonl`` file or the run folder holding one).

    A truncated last line (the job was killed mid-write) or a corrupt line further in is
    skipped and named in ``RunRecord.warnings`` with its byte offset, as is a missing end line.

    Raises:
        RecordError: the file cannot be read.
        RecordCorruptError: the header line is missing or unusable.
    """
    file = record_path(path)
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise RecordError(f"{file}: cannot read run record: {exc.strerror or exc}") from exc
    lines = data.split(b"\n")
    if not data.strip():
        raise RecordCorruptError(str(file), 0, "the file is empty")
    meta, offset = _header(str(file), lines[0])
    warnings: list[str] = []
    fields: dict[str, list[Any]] = {name: [] for name, _ in ITEM_TYPES.values()}
    end: RunEnd | None = None
    for number, raw in enumerate(lines[1:], start=2):
        line_offset = offset
        offset += len(raw) + 1
        if not raw.strip():
            continue
        is_last = number == len(lines) or (number == len(lines) - 1 and not lines[-1])
        try:
            obj = json.loads(raw)
            if not isinstance(obj, dict):
                raise SchemaError("not a JSON object")
            line_type = obj.get("type")
            if line_type == "end":
                end = from_jsonable(RunEnd, obj.get("item"))
            elif line_type in ITEM_TYPES:
                name, item_type = ITEM_TYPES[line_type]
                items: list[Any] = [from_jsonable(item_type, i) for i in _items(obj)]
                if line_type in REPLACING_TYPES:
                    fields[name] = items
                else:
                    fields[name].extend(items)
            else:
                warnings.append(f"line {number} (byte {line_offset}): unknown type {line_type!r}")
        except (ValueError, SchemaError) as exc:
            what = "truncated last line" if is_last else f"corrupt line {number}"
            warnings.append(f"{file}: {what} at byte {line_offset} skipped ({_short(exc)})")
    if end is None:
        warnings.append(
            f"{file}: no end line: the job was killed or is still running; "
            "the record holds what was flushed up to then"
        )
    return RunRecord(
        meta=meta,
        end=end,
        warnings=tuple(warnings),
        **{name: tuple(items) for name, items in fields.items()},  # type: ignore[arg-type]
    )


def _items(obj: dict[str, Any]) -> list[Any]:
    """The items of a line as JSON objects: its ``items``, or its ``fields`` + ``rows``."""
    if "rows" not in obj:
        items = obj.get("items", [])
        if not isinstance(items, list):
            raise SchemaError("items is not a list")
        return items
    names, rows = obj.get("fields"), obj["rows"]
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise SchemaError("rows without a list of field names")
    if not isinstance(rows, list):
        raise SchemaError("rows is not a list")
    found = []
    for row in rows:
        if not isinstance(row, list) or len(row) != len(names):
            raise SchemaError(f"a row does not hold the {len(names)} fields")
        found.append(dict(zip(names, row, strict=True)))
    return found


def _header(file: str, raw: bytes) -> tuple[RunMeta, int]:
    try:
        obj = json.loads(raw)
    except ValueError as exc:
        raise RecordCorruptError(file, 0, f"the header line is not JSON ({_short(exc)})") from exc
    if not isinstance(obj, dict) or obj.get("type") != "header":
        raise RecordCorruptError(file, 0, "the first line is not a stepdoctor record header")
    version = obj.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise RecordCorruptError(
            file,
            0,
            f"schema version {version!r} is newer than this stepdoctor reads "
            f"({SCHEMA_VERSION}): upgrade stepdoctor",
        )
    try:
        meta = from_jsonable(RunMeta, obj.get("meta"))
    except SchemaError as exc:
        raise RecordCorruptError(file, 0, f"bad header: {exc}") from exc
    return meta, len(raw) + 1


def _short(exc: Exception) -> str:
    text = str(exc)
    return text if len(text) <= 120 else text[:117] + "..."
