"""The run record: an append-only JSON Lines file that survives a killed job."""

from __future__ import annotations

from traindoctor.record.format import RECORD_FILENAME
from traindoctor.record.reader import load_run, record_path
from traindoctor.record.writer import RecordWriter

__all__ = ["RECORD_FILENAME", "RecordWriter", "load_run", "record_path"]
