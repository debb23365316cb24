"""A run's steps as record rows: JSON bytes made once, written to the record and kept.

The step reducer (C or Python, collect/reduce/reducer.py) writes each step as its record row as it
makes it (``[index,start_ns,end_ns,"boundary",batch_size,{"phase":ns},gc_count,...]``, the
fields of ``StepTiming`` in order, record/format.py). The monitor writes the rows of each
flush as one ``steps`` line and keeps them, as bytes, for the diagnosis at the end: ~110
bytes a step where a ``StepTiming`` with its dicts and ints held ~500-670 (docs/overhead.md).
``steps_from_rows`` makes the steps again, once, when the run ends (3.8 µs a step here).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, Final

import orjson

from stepdoctor.model import StepTiming, fields_getter, json_default

__all__ = ["STEP_FIELDS", "encode_json", "step_rows_json", "steps_from_rows"]

_GETTER = fields_getter(StepTiming)
assert _GETTER is not None
#: The fields of a step row, in order.
STEP_FIELDS: Final[tuple[str, ...]] = _GETTER[0]
_ROW = _GETTER[1]


def encode_json(value: Any) -> bytes:
    """``value`` as compact JSON: orjson's bytes (UTF-8 as it is), or json's (all ASCII)
    where orjson refuses it (a lone surrogate, an int over 64 bits). Floats must be finite."""
    try:
        return orjson.dumps(value, default=json_default)
    except orjson.JSONEncodeError:
        text = json.dumps(value, separators=(",", ":"), allow_nan=False, default=json_default)
        return text.encode("ascii")


def step_rows_json(steps: Sequence[StepTiming]) -> bytes:
    """The rows of ``steps``, comma-separated, as the C reducer writes them (each value as
    ``encode_json`` writes it)."""
    rows = list(map(_ROW, steps))
    try:
        return orjson.dumps(rows, default=json_default)[1:-1]
    except orjson.JSONEncodeError:
        return b",".join(
            b"[" + b",".join(map(_value_json, row)) + b"]" for row in rows
        )  # one odd value: each value on its own, as the C reducer does


def _value_json(value: Any) -> bytes:
    if isinstance(value, dict):
        items = (encode_json(k) + b":" + encode_json(v) for k, v in value.items())
        return b"{" + b",".join(items) + b"}"
    return encode_json(value)


def steps_from_rows(chunks: Iterable[bytes]) -> list[StepTiming]:
    """The steps the rows in ``chunks`` (each from ``take_rows``/``step_rows_json``) hold.

    Raises:
        ValueError: a chunk is not rows of ``STEP_FIELDS`` (not written by the reducer).
    """
    steps: list[StepTiming] = []
    for chunk in chunks:
        if not chunk:
            continue
        data = b"[" + chunk + b"]"
        try:
            rows = orjson.loads(data)
        except orjson.JSONDecodeError:  # a lone surrogate (written by json) orjson refuses
            rows = json.loads(data)
        for row in rows:
            if not isinstance(row, list) or len(row) != len(STEP_FIELDS):
                raise ValueError(f"a step row does not hold the {len(STEP_FIELDS)} fields")
            steps.append(StepTiming(**dict(zip(STEP_FIELDS, row, strict=True))))
    return steps
