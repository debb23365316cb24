"""One change applied to a job without editing it, for ``stepdoctor tune``'s runs.

The parent passes the change in the ``STEPDOCTOR_TUNE`` environment variable (JSON); the
child (``stepdoctor run``) applies it before the script starts by wrapping
``DataLoader.__init__`` (its keyword arguments overridden) and ``torch.set_num_threads`` (the
tuned value set, the script's own calls ignored), and stops the job after ``max_steps``.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from stepdoctor.errors import UsageError

__all__ = ["TUNE_ENV", "Overrides", "apply_overrides"]

TUNE_ENV = "STEPDOCTOR_TUNE"


@dataclass(frozen=True)
class Overrides:
    """Settings forced on a tuning run (None: the job's own)."""

    max_steps: int
    num_workers: int | None = None
    pin_memory: bool | None = None
    persistent_workers: bool | None = None
    prefetch_factor: int | None = None
    batch_scale: float | None = None
    threads: int | None = None

    def to_env(self) -> str:
        """The value of ``STEPDOCTOR_TUNE`` for a child run."""
        return json.dumps({k: v for k, v in asdict(self).items() if v is not None})

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Overrides | None:
        """Read ``STEPDOCTOR_TUNE``; None when unset."""
        text = environ.get(TUNE_ENV)
        if not text:
            return None
        try:
            return cls(**json.loads(text))
        except (TypeError, ValueError) as exc:
            raise UsageError(f"{TUNE_ENV} is not a valid tuning change: {text!r}") from exc


def apply_overrides(overrides: Overrides) -> Callable[[], None]:
    """Install the overrides (torch must be importable); return a function that removes them."""
    import torch
    from torch.utils.data import DataLoader

    undo: list[Callable[[], None]] = []
    loader_keys = ("num_workers", "pin_memory", "persistent_workers", "prefetch_factor")
    forced = {k: getattr(overrides, k) for k in loader_keys if getattr(overrides, k) is not None}
    if forced or overrides.batch_scale is not None:
        original_init = DataLoader.__init__
        signature = inspect.signature(original_init)

        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            bound = signature.bind(self, *args, **kwargs)
            bound.apply_defaults()
            arguments = bound.arguments
            arguments.update(forced)
            size = arguments.get("batch_size")
            if (
                overrides.batch_scale is not None
                and size
                and arguments.get("batch_sampler") is None
            ):
                arguments["batch_size"] = max(1, round(size * overrides.batch_scale))
            if not arguments.get("num_workers"):
                # DataLoader refuses these without workers.
                arguments["prefetch_factor"] = None
                arguments["persistent_workers"] = False
            original_init(**arguments)

        DataLoader.__init__ = __init__  # type: ignore[method-assign]
        undo.append(lambda: setattr(DataLoader, "__init__", original_init))
    if overrides.threads is not None:
        original_set = torch.set_num_threads
        original_set(overrides.threads)
        setattr(torch, "set_num_threads", lambda nthreads: None)  # noqa: B010  (ours wins)
        undo.append(lambda: setattr(torch, "set_num_threads", original_set))

    def remove() -> None:
        while undo:
            undo.pop()()

    return remove
