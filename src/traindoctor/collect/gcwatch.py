"""Garbage-collector pauses, via ``gc.callbacks`` (hot path: see docs/design/hot-path.md)."""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from typing import Any

from traindoctor.collect.events import GC_START, GC_STOP, EventBuffer

__all__ = ["GcWatch"]


class GcWatch:
    """Append a GC_START/GC_STOP event around every collection while installed."""

    def __init__(self, events: EventBuffer, clock: Callable[[], int]) -> None:
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

        self._callback = callback

    def install(self) -> None:
        """Start watching collections."""
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)

    def uninstall(self) -> None:
        """Stop watching collections."""
        while self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)
