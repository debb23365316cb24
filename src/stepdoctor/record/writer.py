"""Append-only run-record writer.

Every ``write_*`` call appends one line and the file is flushed to the operating system on
``flush()`` (the monitor thread calls it at least once a second) and on ``close()``. Lines
handed to the OS survive the job being killed with SIGKILL, so a killed job loses at most
what was gathered since the last flush.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any, Final

from stepdoctor.model import (
    SCHEMA_VERSION,
    RunEnd,
    RunMeta,
    fields_getter,
    json_default,
    to_jsonable,
)
from stepdoctor.record.format import ITEM_TYPES, RECORD_FILENAME, ROW_TYPES
from stepdoctor.record.rows import encode_json

__all__ = ["FAST_TYPES", "RecordWriter"]

#: Line types encoded with orjson (``rows.encode_json``): steps, whose rows take 0.14 µs a
#: step to encode against json's 1.4 (docs/overhead.md). The monitor writes the steps as the
#: rows the reducer encoded (``write_rows``); ``write_items`` of steps encodes them alike. A
#: step holds ints, strings and dicts of them only, which orjson writes as json does (as
#: UTF-8 rather than ``\u`` escapes, which the reader takes alike). The other lines stay with
#: json: their floats must be finite (``allow_nan=False``) where orjson would write NaN as null.
FAST_TYPES: Final = frozenset({"steps"})


class RecordWriter:
    """Write one run record to ``directory/run.jsonl``.

    Args:
        directory: where the record goes; created if missing.
        meta: the run's metadata, written as the header line at once.

    Raises:
        OSError: when the directory or file cannot be created.
    """

    def __init__(self, directory: Path, meta: RunMeta) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / RECORD_FILENAME
        self._lock = threading.Lock()
        self._file: IO[bytes] | None = self.path.open("ab")
        self._write_line(
            {"type": "header", "schema_version": SCHEMA_VERSION, "meta": to_jsonable(meta)}
        )
        self.flush()

    def write_items(self, line_type: str, items: Sequence[Any]) -> None:
        """Append one line holding ``items`` of the model type registered for ``line_type``
        (as rows for the ``ROW_TYPES``, record/format.py)."""
        if line_type not in ITEM_TYPES:
            raise ValueError(f"unknown record line type {line_type!r}")
        if not items:
            return
        item_type = ITEM_TYPES[line_type][1]
        getter = fields_getter(item_type) if line_type in ROW_TYPES else None
        if getter is not None and all(type(item) is item_type for item in items):
            names, row = getter
            line = {"type": line_type, "fields": names, "rows": list(map(row, items))}
            self._write_line(line, fast=line_type in FAST_TYPES)
        else:
            self._write_line({"type": line_type, "items": items})

    def write_rows(self, line_type: str, fields: Sequence[str], rows: bytes) -> None:
        """Append one line of rows already encoded (comma-separated JSON arrays of the values
        of ``fields``, e.g. ``rows.step_rows_json``'s): the steps the reducer encoded."""
        if line_type not in ROW_TYPES:
            raise ValueError(f"{line_type!r} is not a record line type held as rows")
        if not rows:
            return
        head = json.dumps({"type": line_type, "fields": list(fields)}, separators=(",", ":"))
        self._write_raw(b"".join((head[:-1].encode("ascii"), b',"rows":[', rows, b"]}\n")))

    def write_end(self, end: RunEnd) -> None:
        """Append the end line."""
        self._write_line({"type": "end", "item": to_jsonable(end)})

    def flush(self) -> None:
        """Hand everything written so far to the operating system."""
        with self._lock:
            if self._file is not None:
                self._file.flush()

    def close(self) -> None:
        """Flush and close; later writes are ignored."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        return self._file is None

    def _write_line(self, obj: dict[str, Any], *, fast: bool = False) -> None:
        if fast:
            data = encode_json(obj)  # json where orjson refuses (a lone surrogate)
        else:
            text = json.dumps(obj, separators=(",", ":"), allow_nan=False, default=json_default)
            data = text.encode("ascii")  # json escapes all else (ensure_ascii)
        self._write_raw(data + b"\n")

    def _write_raw(self, data: bytes) -> None:
        with self._lock:
            if self._file is not None:
                self._file.write(data)
