"""Which step reducer a run uses: the C one (``_reduce.c``) where it is built, else its
Python twin (``reducer.StepReducer``, the reference); what the monitor uses of either
(``Reducer``); and the concurrency figures of a job's model calls from their rows.
"""

from __future__ import annotations

from typing import Any, Protocol

from stepdoctor.collect.hooks import events as codes
from stepdoctor.collect.hooks.events import Event, EventBuffer
from stepdoctor.collect.reduce.reducer import MODEL_MODE_AFTER_CALLS, ModelCallsRow, StepReducer
from stepdoctor.model import ConcurrencyStat, StepTiming
from stepdoctor.native import c_part, wanted
from stepdoctor.record.rows import encode_json

__all__ = ["Reducer", "concurrency_stats", "native_reducer", "new_reducer"]


class Reducer(Protocol):
    """What the monitor uses of a reducer: ``StepReducer`` or the C one (``new_reducer``)."""

    @property
    def model_names(self) -> dict[int, str]: ...
    @property
    def mode(self) -> str | None: ...
    def feed(self, events: list[Event]) -> None: ...
    def drain(self, events: EventBuffer) -> None: ...
    def take_steps(self) -> list[StepTiming]: ...
    def take_rows(self) -> bytes: ...
    def take_marks(self) -> bytes: ...
    def take_sample_phases(self) -> list[tuple[object, str]]: ...
    def finish(self) -> list[StepTiming]: ...
    def model_calls(self) -> list[ModelCallsRow]: ...


def concurrency_stats(rows: list[ModelCallsRow], names: dict[int, str]) -> list[ConcurrencyStat]:
    """Per-model statistics of the threads that entered its forward, from ``model_calls()``."""
    stats = []
    for (
        model_id, class_name, calls, threads, max_concurrent, concurrent_calls, solo_ns,
        solo_calls, concurrent_ns, grad_calls, train_mode_calls,
    ) in rows:  # fmt: skip
        stats.append(
            ConcurrencyStat(
                model_id=model_id,  # type: ignore[arg-type]
                class_name=names.get(model_id, class_name),  # type: ignore[call-overload]
                calls=calls,
                threads=threads,
                max_concurrent=max_concurrent,
                concurrent_calls=concurrent_calls,
                solo_mean_ns=solo_ns / solo_calls if solo_calls else None,
                concurrent_mean_ns=concurrent_ns / concurrent_calls if concurrent_calls else None,
                grad_calls=grad_calls,
                train_mode_calls=train_mode_calls,
            )
        )
    return stats


def native_reducer() -> Any:
    """The ``_reduce`` C module, or None (``native.c_part``: not built, switched off, or built
    from other event codes than ``events``')."""
    names = ("ENTER", "EXIT", "STEP", "OPT_END", "FWD_ENTER", "FWD_EXIT", "GC_START", "GC_STOP",
             "SAMPLE")  # fmt: skip
    return c_part(
        "stepdoctor.collect.reduce._reduce", {name: getattr(codes, name) for name in names}
    )


def new_reducer(
    owner_thread: int,
    model_names: dict[int, str] | None = None,
    *,
    native: bool | None = None,
    keep_steps: bool = True,
) -> Reducer:
    """A reducer for ``owner_thread``'s steps: the C one where built, else ``StepReducer``.

    Args:
        native: the C one (True: it must be built), the Python one (False), or the C one
            when built (None).
        keep_steps: hand the steps out as ``StepTiming``s (``take_steps``); a run's monitor
            needs only their rows and progress marks, and the C reducer then makes none.

    Raises:
        RuntimeError: ``native`` is True and the C reducer is not built.
    """
    module = wanted(native_reducer, native, "reducer (collect/reduce/_reduce)")
    if module is None:
        return StepReducer(owner_thread, model_names, keep_steps=keep_steps)
    names = model_names if model_names is not None else {}
    reducer: Reducer = module.Reducer(
        owner_thread, names, StepTiming, MODEL_MODE_AFTER_CALLS, encode_json, keep_steps=keep_steps
    )
    return reducer
