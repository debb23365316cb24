"""Garbage-collector pauses, via ``gc.callbacks`` (hot path: see docs/design/hot-path.md)."""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from typing import Any

from stepdoctor.collect.hooks.events import GC_START, GC_STOP, EventBuffer, native_hooks
from stepdoctor.native import wanted

__all__ = ["GcWatch", "python_gc_callback"]


def python_gc_callback(
    events: EventBuffer, clock: Callable[[], int]
) -> Callable[[str, dict[str, Any]], None]:
    """The ``gc.callbacks`` entry in Python: the C ``_hotpath.gc`` hook's twin and reference."""
    append = events.append
    get_ident = threading.get_ident

    def callback(phase: str, info: dict[str, Any]) -> None:
        append(
            (
                clock(),
                GC_START if phase == "start" else GC_STOP,
                info["generation"],
                get_ident(),
            )
        )

    return callback


class GcWatch:
    """Append a GC_START/GC_STOP event around every collection while installed."""

    def __init__(
        self, events: EventBuffer, clock: Callable[[], int], *, native: bool | None = None
    ) -> None:
        """``native``: the C callback (True: it must be built), the Python one (False), or the
        C one where built (None). The C one saves ~0.3 us of the ~0.9 us a collection costs
        with a callback in the list (docs/overhead.md): a loop whose collation makes garbage
        starts about one young collection a step."""
        module = wanted(native_hooks, native, "gc callback (collect/hooks/_hotpath)")
        self._callback: Callable[[str, dict[str, Any]], object] = (
            python_gc_callback(events, clock) if module is None else module.gc(events.append, clock)
        )

    @property
    def callback(self) -> Callable[[str, dict[str, Any]], object]:
        """The ``gc.callbacks`` entry: the C hook or its Python twin."""
        return self._callback

    def install(self) -> None:
        """Start watching collections."""
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)

    def uninstall(self) -> None:
        """Stop watching collections."""
        while self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)
