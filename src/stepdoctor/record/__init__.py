"""The run record: an append-only JSON Lines file that survives a killed job."""

from __future__ import annotations

from stepdoctor.record.format import RECORD_FILENAME
from stepdoctor.record.reader import load_run, record_path
from stepdoctor.record.writer import RecordWriter

__all__ = ["RECORD_FILENAME", "RecordWriter", "load_run", "record_path"]
