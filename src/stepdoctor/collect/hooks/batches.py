"""What the hooks read off a batch and a loader: its size and the loader's configuration.

A leaf module (nothing of collect's imported): the hooks, the experiment trigger, the trace
capture and the throughput experiments all count samples with ``batch_size_of``.
"""

from __future__ import annotations

from typing import Any

from stepdoctor.model import LoaderInfo

__all__ = ["batch_size_of", "loader_info", "note_workers"]

_PLAIN = (list, tuple, dict)


def batch_size_of(batch: object) -> int | None:
    """Return the leading dimension of the first tensor-like in ``batch`` (None if unknown,
    or if looking raised: the job's batch is not ours to break)."""
    try:
        for _ in range(4):
            # an exact list, tuple or dict has no shape (the C twin skips the lookup)
            shape = None if type(batch) in _PLAIN else getattr(batch, "shape", None)
            if shape is not None:
                return int(shape[0]) if len(shape) else None
            if isinstance(batch, (list, tuple)) and batch:
                batch = batch[0]
            elif isinstance(batch, dict) and batch:
                batch = next(iter(batch.values()))
            else:
                return None
    except Exception:
        return None
    return None


def loader_info(loader: Any) -> LoaderInfo:
    """Describe a DataLoader-like object (workers, batch size, pinning, its dataset)."""
    dataset = getattr(loader, "dataset", None)
    try:
        length: int | None = len(dataset)  # type: ignore[arg-type]
    except TypeError:
        length = None
    context = getattr(loader, "multiprocessing_context", None)
    return LoaderInfo(
        loader_id=id(loader),
        num_workers=int(getattr(loader, "num_workers", 0)),
        batch_size=getattr(loader, "batch_size", None),
        pin_memory=bool(getattr(loader, "pin_memory", False)),
        prefetch_factor=getattr(loader, "prefetch_factor", None),
        persistent_workers=bool(getattr(loader, "persistent_workers", False)),
        dataset_type=type(dataset).__name__,
        dataset_len=length,
        multiprocessing_context=None if context is None else str(context.get_start_method()),
        getitem_at=_code_at(getattr(type(dataset), "__getitem__", None)),
        collate_fn=_collate_fn(getattr(loader, "collate_fn", None)),
        auto_collation=_auto_collation(loader),
    )


def _auto_collation(loader: Any) -> bool | None:
    value = getattr(loader, "_auto_collation", None)  # torch's DataLoader property
    return value if isinstance(value, bool) else None


def _collate_fn(function: Any) -> str:
    """A loader's own collate function as ``name (path:line)``; empty for torch's."""
    # the Hugging Face Trainer wraps its data collator (RemoveColumnsCollator)
    function = getattr(function, "data_collator", function)
    if function is None or str(getattr(function, "__module__", "")).startswith("torch."):
        return ""
    at = _code_at(function) or _code_at(vars(type(function)).get("__call__"))
    name = getattr(function, "__qualname__", None) or type(function).__qualname__
    return f"{name} ({at})" if at else ""


def _code_at(function: Any) -> str:
    """``path:line`` of a Python function's definition; empty for anything else."""
    code = getattr(function, "__code__", None)
    if code is None:
        return ""
    return f"{code.co_filename}:{code.co_firstlineno}"


def note_workers(iterator: Any, loader: Any, workers: list[tuple[int, int]]) -> None:
    """Note the worker processes a DataLoader's iterator started (``(pid, id(loader))``).

    torch's multi-process iterator keeps them in ``_workers`` (``multiprocessing`` processes,
    started by its constructor); other iterators have none. Told apart from the processes the
    job starts itself, which compete with it for the CPUs (the helper-processes rule).
    """
    try:
        for process in getattr(iterator, "_workers", None) or ():
            pid = getattr(process, "pid", None)
            if isinstance(pid, int):
                workers.append((pid, id(loader)))
    except Exception:  # the job's loader is not ours to break
        return
