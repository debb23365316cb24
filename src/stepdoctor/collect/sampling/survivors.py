"""What outlived the allocation window (``allocations.py``): the lines whose objects are
still alive at its end (``gc`` and ``growth`` sites, from tracemalloc's tracebacks), the
tensors made in it and kept past it with what holds them, and the types the collector holds
more of.

The census of tensors and of objects by type runs in C (``_sample.c``): a census from Python
code is not safe while the job runs.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import itertools
import os
import sys
import tracemalloc
import types
import weakref
from collections import Counter
from typing import Any

from stepdoctor.collect.sampling._code import qualified_name
from stepdoctor.collect.sampling.sampler import native_sampler
from stepdoctor.model import AllocationSite

__all__ = [
    "GROWTH_MIN_BYTES",
    "OLD_TAIL",
    "TOP_ALLOCATION_SITES",
    "RawTraceback",
    "TensorsAlive",
    "grown_types",
    "held_by_traceback",
    "kept_tensors",
    "new_tensor_refs",
    "objects_by_type",
    "surviving_sites",
    "tensors_alive",
    "user_modules",
]

#: A line must add this many bytes over the window to count as growth: CPython's free lists
#: (tuples, floats, dicts, lists) keep freed objects, which tracemalloc sees as held, and
#: fill over tens of kilobytes (measured: 28 KiB of a TensorDataset's sample tuples in one
#: second). 64 KiB in 2 s is ~2 MiB/min, below what memory-growth reports.
GROWTH_MIN_BYTES = 64 * 1024
#: The census of the window's surviving objects reads this many of the newest objects of
#: generation 2 (those that survived the window's collections are appended there); the C
#: census holds the GIL while it runs, ~0.1 µs an object.
OLD_TAIL = 500_000
#: Sites kept of each kind.
TOP_ALLOCATION_SITES = 5
#: The newest items of a global container read for kept tensors it holds: ~20 ms with the
#: GIL held (measured ~80 ns an item, ``map(id, ...)``, on the 2-core reference machine).
#: What a job keeps is appended each step, and the tensors sought were made seconds ago.
HOLDER_SCAN_ITEMS = 250_000


def _tensor_type() -> type | None:
    tensor = getattr(sys.modules.get("torch"), "Tensor", None)
    return tensor if isinstance(tensor, type) else None


def _tensors() -> list[Any]:
    """The tensors alive now (none when torch is not imported or the C census is not built:
    a census from Python code is not safe while the job runs, see ``_sample.c``)."""
    tensor = _tensor_type()
    census = native_sampler()
    if tensor is None or census is None:
        return []
    tensors: list[Any] = census.instances(tensor)
    return tensors


TensorsAlive = dict[int, "weakref.ref[Any]"]
"""The tensors alive at a moment, by id, each held weakly: an id alone is no identity (a
tensor freed since frees its id, and the job's next tensor often gets it: CPython's allocator
hands out the block freed last)."""


def tensors_alive() -> TensorsAlive:
    """The tensors alive now, by id."""
    alive: TensorsAlive = {}
    for obj in _tensors():
        with contextlib.suppress(TypeError):
            alive[id(obj)] = weakref.ref(obj)
    return alive


def new_tensor_refs(before: TensorsAlive) -> list[weakref.ref[Any]]:
    """Weak references to the tensors alive now that were not alive at ``before``."""
    refs = []
    for obj in _tensors():
        old = before.get(id(obj))
        if old is not None and old() is obj:
            continue
        with contextlib.suppress(TypeError):
            refs.append(weakref.ref(obj))
    return refs


def kept_tensors(
    made: list[weakref.ref[Any]],
    *,
    modules: list[types.ModuleType] | None = None,
    top: int = TOP_ALLOCATION_SITES,
) -> list[AllocationSite]:
    """The tensors of ``made`` (made in the window's first half) still alive: kept beyond the
    step that made them. Grouped by dtype, shape and the operation that made them
    (``grad_fn``: a tensor that keeps its autograd graph), with what holds them (tracemalloc
    does not see torch's tensor objects, so they have no creation line)."""
    groups: dict[tuple[str, tuple[int, ...], str], list[Any]] = {}
    nbytes: Counter[tuple[str, tuple[int, ...], str]] = Counter()
    storages: set[int] = set()
    for ref in made:
        obj = ref()
        if obj is None:
            continue
        grad_fn = type(obj.grad_fn).__name__ if obj.grad_fn is not None else ""
        key = (str(obj.dtype).removeprefix("torch."), tuple(obj.shape), grad_fn)
        groups.setdefault(key, []).append(obj)
        with contextlib.suppress(Exception):  # no storage (meta, sparse): counted as 0 bytes
            storage = obj.untyped_storage()
            if storage.data_ptr() not in storages:  # views of one storage count it once
                storages.add(storage.data_ptr())
                nbytes[key] += storage.nbytes()
    obj = None
    total = sum(nbytes.values())
    ranked = sorted(groups, key=lambda k: (-nbytes[k], -len(groups[k])))[:top]
    out = []
    holders = _holders_of([groups[k] for k in ranked], modules or [])
    for key, holder in zip(ranked, holders, strict=True):
        dtype, shape, grad_fn = key
        what = f"{dtype}[{', '.join(map(str, shape))}]" + (f" with {grad_fn}" if grad_fn else "")
        out.append(
            AllocationSite(
                kind="tensors",
                file="",
                line=0,
                function=what,
                user=True,
                count=len(groups[key]),
                size_bytes=nbytes[key],
                share=nbytes[key] / total if total else len(groups[key]) / len(made),
                caller=holder
                or (
                    "autograd graphs (saved for the backward of tensors kept with their graph)"
                    if grad_fn
                    else ""
                ),
            )
        )
    groups.clear()
    return out


def _holders_of(groups: list[list[Any]], modules: list[types.ModuleType]) -> list[str]:
    """For each group of tensors, what holds the first of its members (up to 5 tried) that a
    global of ``modules`` holds: ``list 'kept' (global of train.py)``, or "". Only module
    globals are searched, by identity: ``gc.get_referrers`` would hand Python code every
    container of the process (``_sample.c`` says why that is not safe while the job runs).
    Each global is read once for every group, in C (``_held_ids``)."""
    wanted = {id(m): index for index, members in enumerate(groups) for m in members[:5]}
    holders = [""] * len(groups)
    ids = frozenset(wanted)
    for module in modules:
        try:
            items = list(vars(module).items())
        except Exception:  # a module whose namespace cannot be read
            continue
        file = getattr(module, "__file__", None) or getattr(module, "__name__", "?")
        for name, value in items:
            for found in _held_ids(value, ids):
                if not holders[wanted[found]]:
                    holders[wanted[found]] = f"{type(value).__name__} {name!r} (global of {file})"
            if all(holders):
                return holders
    return holders


def _held_ids(value: object, wanted: frozenset[int]) -> frozenset[int]:
    """The ids of ``wanted`` that the container ``value`` holds, reading at most its newest
    ``HOLDER_SCAN_ITEMS`` items (a set that large, which has no newest, is not read). The ids
    are taken in C (``map(id, ...)``): a loop of Python code over a container of millions (a
    job's cache) would run for seconds beside the job, and hand the GIL back and forth with it
    at each switch interval, slowing its steps (measured: ~600 ms a step for 40 steps beside
    a 1.5M-item cache, 7 ms without)."""
    try:
        if isinstance(value, dict):
            items: Any = value.values()
        elif isinstance(value, list | tuple | collections.deque):
            items = value
        elif isinstance(value, set | frozenset):
            items = value if len(value) <= HOLDER_SCAN_ITEMS else ()
        else:
            return frozenset()
        if len(items) > HOLDER_SCAN_ITEMS:  # what a job keeps each step is appended last
            items = itertools.islice(reversed(items), HOLDER_SCAN_ITEMS)
        return wanted.intersection(map(id, items))
    except Exception:  # changed while read (another thread): not found
        return frozenset()


RawTraceback = tuple[tuple[str, int], ...]
"""A traceback as tracemalloc keeps it: ``(file, line)`` frames, the most recent first."""


def held_by_traceback() -> tuple[Counter[RawTraceback], Counter[RawTraceback]]:
    """Bytes and blocks alive now that tracemalloc traced, by traceback. Read from
    ``tracemalloc._get_traces()`` (the list ``take_snapshot`` wraps), which hands out one
    tuple per distinct traceback: grouping by its id is cheap, where a snapshot's
    ``statistics`` builds and hashes an object per trace (measured: 6.8 s for a window of
    156,000 allocations here; this takes a few hundredths of that)."""
    sizes: Counter[RawTraceback] = Counter()
    blocks: Counter[RawTraceback] = Counter()
    get_traces = getattr(tracemalloc, "_get_traces", None)
    if get_traces is None:  # not CPython's tracemalloc: the public, slower way
        for stat in tracemalloc.take_snapshot().statistics("traceback"):
            raw = tuple((f.filename, f.lineno) for f in reversed(stat.traceback))
            sizes[raw] += stat.size
            blocks[raw] += stat.count
        return sizes, blocks
    by_id: dict[int, RawTraceback] = {}
    size_by_id: dict[int, int] = {}
    count_by_id: Counter[int] = Counter()
    for trace in get_traces():
        raw = trace[2]
        key = id(raw)
        if key not in by_id:
            by_id[key] = raw
            size_by_id[key] = 0
        size_by_id[key] += trace[1]
        count_by_id[key] += 1
    for key, raw in by_id.items():
        sizes[raw] += size_by_id[key]
        blocks[raw] += count_by_id[key]
    return sizes, blocks


def objects_by_type() -> Counter[str]:
    """The collector's objects counted by type (``module.Name``), by the C census (none where
    it is not built)."""
    census = native_sampler()
    counts: Counter[str] = Counter()
    if census is None:
        return counts
    for kind, n in census.count_by(type, -1, -1).items():
        module = getattr(kind, "__module__", "")
        if not isinstance(module, str):  # a type whose __module__ is a descriptor
            module = ""
        if module == "stepdoctor" or module.startswith("stepdoctor."):
            continue  # our own records of the run (samples, steps): not the job's
        name = getattr(kind, "__qualname__", "?")
        if not isinstance(name, str):
            name = "?"
        counts[name if module == "builtins" else f"{module}.{name}"] += n
    return counts


def grown_types(
    before: Counter[str], after: Counter[str], *, top: int = TOP_ALLOCATION_SITES
) -> list[AllocationSite]:
    """The types the collector holds more of at the window's end than at its start: Python
    objects by type, the first thing to look at for a leak that tracemalloc's lines leave
    vague (a cache of instances filled from many places)."""
    grown = {name: after[name] - before.get(name, 0) for name in after}
    grown = {name: n for name, n in grown.items() if n > 0}
    total = sum(grown.values())
    ranked = sorted(grown.items(), key=lambda item: -item[1])[:top]
    return [
        AllocationSite(
            kind="types",
            file="",
            line=0,
            function=name,
            user=True,
            count=n,
            size_bytes=0,
            share=n / total,
        )
        for name, n in ranked
    ]


def _objects_by_traceback() -> Counter[RawTraceback]:
    """The collector's objects that tracemalloc traced, counted by traceback: generations 0
    and 1, and the newest ``OLD_TAIL`` objects of generation 2 (objects that survive a
    collection are appended to the older generation). Counted by the C census (``_sample.c``:
    the job's thread may be building one of these objects); none where it is not built."""
    census = native_sampler()
    get = getattr(tracemalloc, "_get_object_traceback", None)
    counts: Counter[RawTraceback] = Counter()
    if census is None or get is None:
        return counts
    for generation, tail in ((0, -1), (1, -1), (2, OLD_TAIL)):
        counts.update(census.count_by(get, generation, tail))
    return counts


def user_modules(first: list[types.ModuleType], roots: tuple[str, ...]) -> list[types.ModuleType]:
    """``first``, then the loaded modules of the job's own code (not a library's)."""
    mods = list(first)
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if isinstance(file, str) and not _absolute(file).startswith(roots) and module not in mods:
            mods.append(module)
    return mods


def surviving_sites(
    library_roots: tuple[str, ...],
    *,
    since: Counter[RawTraceback] | None = None,
    modules: list[types.ModuleType] | None = None,
    top: int = TOP_ALLOCATION_SITES,
) -> list[AllocationSite]:
    """The sites of what tracemalloc traced and is still alive now (tracemalloc must be on).

    ``gc`` sites count the collector's objects alive; ``growth`` sites the bytes that both
    halves of the window added (``since``: ``held_by_traceback()`` in its middle): what kept
    growing, not what was made once and kept (a DataLoader's epoch of shuffled indices).
    """
    held, held_blocks = held_by_traceback()
    counts: Counter[tuple[str, int, str]] = Counter()
    sizes: Counter[tuple[str, int, str]] = Counter()
    where: dict[tuple[str, int, str], tuple[str, bool, str]] = {}
    traces: dict[RawTraceback, tracemalloc.Traceback] = {}
    sites: dict[tracemalloc.Traceback, tuple[str, int, str] | None] = {}

    def site_of(raw: RawTraceback) -> tuple[str, int, str] | None:
        trace = traces.get(raw)
        if trace is None:
            trace = traces[raw] = tracemalloc.Traceback(raw)
        if trace not in sites:
            key = None
            if not _ours(trace, library_roots):
                key, where[key] = _site(trace, library_roots)
            sites[trace] = key
        return sites[trace]

    for raw, n in _objects_by_traceback().items():
        key = site_of(raw)
        if key is not None:
            counts[key] += n
            sizes[key] += held.get(raw, 0)
    grown: Counter[tuple[str, int, str]] = Counter()
    blocks: Counter[tuple[str, int, str]] = Counter()
    if since is None:
        halves = [held]
    else:
        second = held.copy()
        second.subtract(since)
        halves = [since, second]
    per_half: list[Counter[tuple[str, int, str]]] = []
    for half_held in halves:
        half: Counter[tuple[str, int, str]] = Counter()
        for raw, size in half_held.items():
            if size > 0:
                key = site_of(raw)
                if key is not None:
                    half[key] += size
        per_half.append(half)
    for raw, n in held_blocks.items():
        key = site_of(raw) if raw in traces else None
        if key is not None:
            blocks[key] += n
    # Growth is what both halves of the window added: a line that allocates once (a new
    # epoch's shuffled indices) adds in one half only.
    for key in per_half[0]:
        grown[key] = min(half[key] for half in per_half)
    grown = Counter({k: v for k, v in grown.items() if v * len(per_half) >= GROWTH_MIN_BYTES})
    out = _ranked("gc", counts, sizes, where, by_count=True, top=top)
    out += _ranked("growth", blocks, grown, where, by_count=False, top=top)
    names = _function_names({(a.file, a.line) for a in out}, modules or [])
    return [dataclasses.replace(a, function=names.get((a.file, a.line), "<module>")) for a in out]


def _ranked(
    kind: str,
    counts: Counter[tuple[str, int, str]],
    sizes: Counter[tuple[str, int, str]],
    where: dict[tuple[str, int, str], tuple[str, bool, str]],
    *,
    by_count: bool,
    top: int,
) -> list[AllocationSite]:
    ranked = counts if by_count else sizes
    total = sum(ranked.values())
    if not total:
        return []
    out = []
    for key, value in ranked.most_common(top):
        caller, user, _ = where[key]
        out.append(
            AllocationSite(
                kind=kind,
                file=key[0],
                line=key[1],
                function=key[2],
                user=user,
                count=counts[key],
                size_bytes=sizes[key],
                share=value / total,
                caller=caller,
            )
        )
    return out


def _ours(trace: tracemalloc.Traceback, roots: tuple[str, ...]) -> bool:
    """Whether stepdoctor made the allocation (a frame of its own, none of the job's)."""
    files = [_absolute(f.filename) for f in trace]
    return any(f.startswith(roots[0]) for f in files) and all(
        f.startswith(roots) or f.startswith("<") for f in files
    )


def _site(
    trace: tracemalloc.Traceback, roots: tuple[str, ...]
) -> tuple[tuple[str, int, str], tuple[str, bool, str]]:
    """(file, line, function) of the innermost frame of the job's own code in ``trace``
    (oldest frame first), else of its innermost frame; and (the library call below it as
    ``file:line``, whether it is the job's code, "")."""
    frames = [(_absolute(f.filename), f.lineno) for f in trace]
    at = next(
        (
            i
            for i in range(len(frames) - 1, -1, -1)
            if not frames[i][0].startswith(roots) and not frames[i][0].startswith("<")
        ),
        None,
    )
    index = len(frames) - 1 if at is None else at
    file, line = frames[index]
    below = frames[index + 1] if index + 1 < len(frames) else None
    caller = f"{below[0]}:{below[1]}" if below is not None else ""
    return (file, line, ""), (caller, at is not None, "")


@functools.lru_cache(maxsize=4096)
def _absolute(file: str) -> str:
    """``file`` as an absolute path (a script started by a relative path has relative code
    file names); ``<...>`` names as they are."""
    return file if file.startswith("<") else os.path.abspath(file)


def _function_names(
    lines: set[tuple[str, int]], extra: list[types.ModuleType]
) -> dict[tuple[str, int], str]:
    """The qualified name of the function holding each ``(file, line)`` (tracemalloc keeps
    lines, not functions), from the code of the loaded modules of those files: their
    functions, classes' methods and the functions nested in them."""
    files = {file for file, _ in lines}
    found: dict[tuple[str, int], str] = {}
    for module in [*extra, *sys.modules.values()]:
        module_file = getattr(module, "__file__", None)
        if not isinstance(module_file, str) or _absolute(module_file) not in files:
            continue
        for value in list(vars(module).values()):
            members = list(vars(value).values()) if isinstance(value, type) else [value]
            for member in members:
                code = getattr(getattr(member, "__func__", member), "__code__", None)
                if isinstance(code, types.CodeType) and _absolute(code.co_filename) in files:
                    _code_lines(code, lines, found)
    return found


def _code_lines(
    code: types.CodeType, wanted: set[tuple[str, int]], found: dict[tuple[str, int], str]
) -> None:
    for _, _, line in code.co_lines():
        key = (_absolute(code.co_filename), line or 0)
        if key in wanted:
            found[key] = qualified_name(code)  # nested code (below) is more precise: it wins
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _code_lines(const, wanted, found)
