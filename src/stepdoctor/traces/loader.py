"""Stream a Kineto / Chrome-trace JSON file (``.json`` or ``.json.gz``) into compact columns.

Only what the analyses need is kept: GPU events (kernels, memcpy, memset, stream syncs), the
runtime calls that launched them (by correlation id) and the ``ProfilerStep#N`` spans. Memory
is bounded by those, not by the file: a CPU-op-heavy trace of a gigabyte streams through.

Three ways to read, giving the same events (tests/traces/test_loader_paths.py):

- the C scanner (``_scan.c``, built at install where a compiler is there; the default): the
  file in 1 MB chunks, the whole document validated, ``_take``'s rules applied in C, Python
  objects made only of what is kept; an unusual event is handed to ``_take``, an invalid
  document to the ijson stream for the error message;
- the ijson stream (the reference; where nothing was compiled, or with
  ``STEPDOCTOR_PURE_PYTHON=1``): every event parsed into a dict by ijson's C parser and
  given to ``_take``;
- simdjson (``fast=True`` where the C scanner is not built, with the optional ``pysimdjson``:
  ``pip install stepdoctor[fast]``): files up to ``WHOLE_FILE_MAX_BYTES`` parsed whole, only
  the wanted events made dicts: ~1.5x the ijson stream, but the document and simdjson's tape
  sit in memory. The C scanner is twice as fast again in a fifth of the memory, so where it is
  built ``fast`` changes nothing.

Every event is parsed, even the CPU ops no analysis uses: reading a file whole and parsing only
the wanted events (found by a regular expression) loaded the A100 trace 1.45x faster, but a
file broken only among the skipped events then loaded without a word, where the issue wants
the byte offset named (docs/traces.md).
"""

from __future__ import annotations

import gzip
import json
import math
import sys
import zlib
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import IO, Any, TypeGuard

from stepdoctor.errors import TraceError
from stepdoctor.native import c_part

__all__ = ["GpuEvent", "Launch", "RankEvents", "load_events"]

#: GPU-side categories, new schema and old (capitalised) schema.
_GPU_CATEGORIES = frozenset(
    {"kernel", "gpu_memcpy", "gpu_memset", "cuda_sync", "Kernel", "Memcpy", "Memset"}
)
#: Host-side categories whose events carry the correlation id of what they launched.
_LAUNCH_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver", "Runtime", "Driver"})
_STEP_PREFIX = "ProfilerStep#"
_WANTED = _GPU_CATEGORIES | _LAUNCH_CATEGORIES
#: Largest file (uncompressed) parsed whole with simdjson: the text and simdjson's tape stay
#: well under the 1 GB issue 5 allows for a 1 GB trace; larger files stream.
WHOLE_FILE_MAX_BYTES = 256 * 2**20
#: Bytes of (unzipped) text the C scanner is given at a time: big enough that the Python
#: loop around it costs nothing, small enough that memory stays bounded by the kept events.
SCAN_CHUNK_BYTES = 2**20


@dataclass(slots=True)
class GpuEvent:
    """One event on a GPU stream (µs, integers)."""

    ts: int
    dur: int
    stream: int
    correlation: int | None
    name: str
    category: str


@dataclass(slots=True)
class Launch:
    """A runtime/driver call with a correlation id (µs, integers)."""

    ts: int
    dur: int
    name: str


@dataclass
class RankEvents:
    """What one rank's file holds, reduced to what the analyses use."""

    path: str
    rank: int | None = None
    world_size: int | None = None
    device: str | None = None
    events: int = 0
    gpu: list[GpuEvent] = field(default_factory=list)
    launches: dict[int, Launch] = field(default_factory=dict)
    steps: list[tuple[str, int]] = field(default_factory=list)
    """``(ProfilerStep#N, start µs)``."""
    warnings: list[str] = field(default_factory=list)
    odd_events: int = 0
    """Entries of ``traceEvents`` that are not objects (skipped)."""
    first_ts: int | None = None
    """Start of the file's first event with a duration and a category (HTA's row 0, which
    stands in for the launch of a GPU event whose launch is not in the file)."""


def load_events(path: Path, *, fast: bool = False) -> RankEvents:
    """Read one trace file.

    Args:
        fast: where the C scanner is not built, parse the file whole with simdjson when it
            is installed and the file is at most ``WHOLE_FILE_MAX_BYTES`` (faster than the
            ijson stream, more memory).

    Raises:
        TraceError: the file is missing, empty, not gzip/JSON, or has no ``traceEvents``; the
            message names the file and, where known, the byte offset.
    """
    out = RankEvents(path=str(path))
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise TraceError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    if size == 0:
        raise TraceError(f"{path}: the file is empty (0 bytes)")
    if _scan_native(path, out):
        return _finished(path, out)
    import ijson  # ~20 ms to import: only where the C scanner did not read the file

    with _open(path) as f:
        _read_header(ijson, f, out)
    if fast and native_scanner() is None and _read_whole(path, out):
        return _finished(path, out)
    with _open(path) as f:
        try:
            for event in ijson.items(f, "traceEvents.item", use_float=True):
                out.events += isinstance(event, dict)
                _take(event, out)
        except (ijson.JSONError, ijson.IncompleteJSONError) as exc:
            raise _bad(path, f, f"invalid JSON: {exc}", out) from exc
        except (EOFError, zlib.error, gzip.BadGzipFile, OSError) as exc:
            raise _bad(path, f, f"truncated or corrupt gzip: {exc}", out) from exc
        except UnicodeDecodeError as exc:
            raise _bad(path, f, f"not UTF-8 text: {exc.reason}", out) from exc
    return _finished(path, out)


def _finished(path: Path, out: RankEvents) -> RankEvents:
    if out.events == 0 and not out.odd_events:
        raise TraceError(f"{path}: no traceEvents (not a PyTorch profiler / Chrome trace?)")
    if out.odd_events:
        out.warnings.append(f"{out.odd_events:,} trace events are not JSON objects (skipped)")
    return out


def native_scanner() -> Any:
    """The ``_scan`` C module, or None: not built (no compiler at install) or switched off
    with ``STEPDOCTOR_PURE_PYTHON=1``."""
    return c_part("stepdoctor.traces._scan")


def _scan_native(path: Path, out: RankEvents) -> bool:
    """Read the file with the C scanner into ``out`` (False, ``out`` untouched: the scanner is
    not built, or it found the file invalid, or unzipping failed: the streaming way then says
    what is wrong, and where)."""
    scan = native_scanner()
    if scan is None:
        return False
    found = RankEvents(path=out.path)
    escaped_header = [False]

    def take(raw: bytes) -> None:
        """An event of an unusual shape: parsed by ijson, kept by ``_take``."""
        import ijson

        try:
            event = next(ijson.items(raw, "", use_float=True))
        except (ijson.JSONError, StopIteration) as exc:  # the stream will say where
            raise ValueError(f"ijson refused an event the scanner took: {exc}") from exc
        found.first_ts = scanner.first_ts
        _take(event, found)
        scanner.first_ts = found.first_ts

    def header(key: str, raw: bytes) -> None:
        if b"\\" in raw:
            escaped_header[0] = True  # decoded as ijson decodes escapes, below
        else:
            _header_member(key, raw, found)

    scanner = scan.Scanner(GpuEvent, Launch, take, header)
    found.gpu, found.launches, found.steps = scanner.gpu, scanner.launches, scanner.steps
    size = SCAN_CHUNK_BYTES
    try:
        with _open(path) as f:
            rest = b""
            while True:
                chunk = f.read(size)
                final = not chunk
                buffer = rest + chunk if rest else chunk
                used = scanner.feed(buffer, final)
                rest = buffer[used:]
                if final:
                    break
                if used == 0:
                    size *= 2  # a unit larger than a chunk: read more before scanning again
    except (ValueError, EOFError, zlib.error, OSError):
        # InvalidError (a ValueError), a refused event or header, a broken gzip: the
        # streaming way reads the file again and says what is wrong, and where
        return False
    if scanner.events == 0 and not scanner.odd_events:
        return False  # nothing to analyse: the streaming way says what the file is instead
    out.events, out.odd_events, out.first_ts = scanner.events, scanner.odd_events, scanner.first_ts
    out.gpu, out.launches, out.steps = found.gpu, found.launches, found.steps
    if escaped_header[0]:
        import ijson

        with _open(path) as f:
            _read_header(ijson, f, out)
    else:
        out.rank, out.world_size, out.device = found.rank, found.world_size, found.device
    return True


def _header_member(key: str, raw: bytes, out: RankEvents) -> None:
    """What ``_read_header`` takes from a top-level ``distributedInfo`` or
    ``deviceProperties`` given whole (valid JSON, no escapes), read the way its ijson events
    would be: members in order, numbers as int or Decimal, a container as ``None``."""
    value = json.loads(raw, object_pairs_hook=_Pairs, parse_float=Decimal)
    if key == "distributedInfo" and isinstance(value, _Pairs):
        for name, item in value:
            if isinstance(item, (int, Decimal)) and not isinstance(item, bool):
                if name == "rank":
                    out.rank = int(item)
                elif name == "world_size":
                    out.world_size = int(item)
    elif key == "deviceProperties" and isinstance(value, list):
        for device in value:
            if out.device is not None:
                return
            if isinstance(device, _Pairs):
                for name, item in device:
                    if name == "name" and out.device is None:
                        container = isinstance(item, (list, _Pairs))
                        out.device = str(None if container else item)


class _Pairs(list[tuple[str, Any]]):
    """A JSON object as its members in order (repeated keys kept)."""


def _read_whole(path: Path, out: RankEvents) -> bool:
    """Parse the file whole with simdjson into ``out`` (False, ``out`` untouched: simdjson is
    not installed, the file is too large or simdjson refuses it)."""
    try:
        import simdjson
    except ImportError:
        return False
    try:
        with _open(path) as f:
            data = f.read(WHOLE_FILE_MAX_BYTES + 1)
        if len(data) > WHOLE_FILE_MAX_BYTES:
            return False
        doc = simdjson.Parser().parse(data)
    except (ValueError, RuntimeError, EOFError, zlib.error, OSError):
        return False  # the streaming way says what is wrong, and where
    events = doc.get("traceEvents") if isinstance(doc, simdjson.Object) else None
    if not isinstance(events, simdjson.Array):
        return False
    found = RankEvents(path=out.path, rank=out.rank, world_size=out.world_size, device=out.device)
    obj = simdjson.Object
    wanted, prefix = _WANTED, _STEP_PREFIX
    for event in events:
        if not isinstance(event, obj):
            found.odd_events += 1
            continue
        found.events += 1
        if found.first_ts is None:
            _take(event.as_dict(), found)  # sets first_ts from the first event with times
            continue
        cat, name = event.get("cat"), event.get("name")
        if (type(cat) is str and cat in wanted) or (type(name) is str and name.startswith(prefix)):
            _take(event.as_dict(), found)
    if found.events == 0 and not found.odd_events:
        return False  # nothing to analyse: the streaming way says what the file is instead
    for name in ("events", "gpu", "launches", "steps", "odd_events", "first_ts"):
        setattr(out, name, getattr(found, name))
    return True


def _open(path: Path) -> IO[bytes]:
    with path.open("rb") as probe:
        magic = probe.read(2)
    if magic == b"\x1f\x8b":
        return gzip.GzipFile(path, "rb")  # type: ignore[return-value]
    return path.open("rb")


def _bad(path: Path, f: IO[bytes], what: str, out: RankEvents) -> TraceError:
    try:
        offset = f.tell()
    except (OSError, ValueError):
        offset = None
    where = f" near byte {offset:,}" if offset is not None else ""
    what = " ".join(what.split())  # parsers' messages span lines: one line each
    return TraceError(f"{path}: {what}{where} (after {out.events:,} events)")


def _read_header(ijson: Any, f: IO[bytes], out: RankEvents) -> None:
    """distributedInfo.rank / world_size and the first device's name, from the keys before
    traceEvents (Kineto writes them first; a file that puts them after is read without them)."""
    try:
        for prefix, event, value in ijson.parse(f):
            if prefix == "traceEvents" and event == "start_array":
                return
            if prefix == "distributedInfo.rank" and event == "number":
                out.rank = int(value)
            elif prefix == "distributedInfo.world_size" and event == "number":
                out.world_size = int(value)
            elif prefix == "deviceProperties.item.name" and out.device is None:
                out.device = str(value)
    except Exception:  # the main pass reports what is wrong with the file
        return


def _take(event: Any, out: RankEvents) -> None:
    if not isinstance(event, dict):
        out.odd_events += 1
        return
    if out.first_ts is None and event.get("dur") is not None:
        cat = event.get("cat")
        if cat is not None and cat != "Trace":
            out.first_ts = _times(event)[0]
    if event.get("ph") != "X":
        return
    category = event.get("cat")
    if not isinstance(category, str):
        category = None
    args = event.get("args")
    if not isinstance(args, dict):
        args = {}
    if category in _GPU_CATEGORIES:
        stream = args.get("stream")
        if stream is None:
            stream = event.get("tid") if category != "cuda_sync" else None
        if type(stream) is not int and not _finite(stream):
            return  # a sync with no stream is not on the GPU timeline
        ts, dur = _times(event)
        if ts is None:
            return
        correlation = args.get("correlation")
        out.gpu.append(
            GpuEvent(
                ts=ts,
                dur=dur,
                stream=stream if type(stream) is int else int(stream),
                correlation=(
                    correlation
                    if type(correlation) is int
                    else int(correlation)
                    if _finite(correlation)
                    else None
                ),
                name=_name(event),
                category=sys.intern(str(category)),
            )
        )
    elif category in _LAUNCH_CATEGORIES:
        correlation = args.get("correlation")
        if _finite(correlation):
            ts, dur = _times(event)
            if ts is not None:
                out.launches[int(correlation)] = Launch(ts=ts, dur=dur, name=_name(event))
    else:
        name = event.get("name")
        if isinstance(name, str) and name.startswith(_STEP_PREFIX):
            ts, _ = _times(event)
            if ts is not None:
                out.steps.append((name, ts))


def _finite(value: object) -> TypeGuard[int | float]:
    """A JSON number usable as an integer (not a bool, NaN or infinity)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value)


def _name(event: dict[str, Any]) -> str:
    """The event's name, interned: a trace repeats a few thousand kernel names millions of
    times, and one copy of each keeps a gigabyte trace's analysis in bounded memory."""
    return sys.intern(str(event.get("name", "")))


def _times(event: dict[str, Any]) -> tuple[int | None, int]:
    """HTA's rule for ns-resolution traces: ts = ceil(ts), end = floor(ts + dur)."""
    ts, dur = event.get("ts"), event.get("dur", 0)
    if type(ts) is int and type(dur) is int:
        return ts, dur  # the common case, first
    if not _finite(ts) or not _finite(dur):
        return None, 0
    if isinstance(ts, float) or isinstance(dur, float):
        start = math.ceil(ts)
        end = math.floor(ts + dur)
        return start, end - start
    return ts, dur
