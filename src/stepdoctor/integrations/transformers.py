"""The Hugging Face ``Trainer`` (``transformers``): its loop in its own terms.

::

    trainer = Trainer(..., callbacks=[StepdoctorCallback()])   # or: stepdoctor run train.py

A step is an optimizer update (torch's optimizer hooks end it); with
``gradient_accumulation_steps`` its batches are micro-batches. The data collator runs inside
the DataLoader's fetch (``dataloader_num_workers=0``), so its time is ``data_wait``.
``StepdoctorCallback`` finds its Trainer when training begins and times, each by name,
``Trainer.evaluate`` as ``evaluation``, ``Trainer._save_checkpoint`` as ``checkpoint``,
``Trainer.log`` and the other callbacks' events as ``callbacks``; it notes the
``TrainingArguments`` the rules judge. Outside ``stepdoctor run`` it records a run of its
own per ``train()`` and prints the diagnosis at its end. Under ``stepdoctor run`` every
Trainer gets one (``install``).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

from stepdoctor.collect.hooks.session import BaseSession
from stepdoctor.errors import UsageError
from stepdoctor.integrations._timing import (
    FrameworkTimer,
    OwnSession,
    Setting,
    guarded,
    note_settings,
    time_method,
)
from stepdoctor.model import Phase

try:
    import transformers
    from transformers import Trainer, TrainerCallback
except ImportError as exc:  # pragma: no cover - depends on what is installed
    raise UsageError(
        "the Hugging Face integration needs transformers: pip install stepdoctor[transformers]"
    ) from exc

__all__ = ["TIMED_METHODS", "StepdoctorCallback", "install"]

_CALLBACKS = Phase.CALLBACKS.value

#: The Trainer's methods timed as phases of their own, with the names they are shown by.
TIMED_METHODS: dict[str, tuple[str, str]] = {
    "evaluate": (Phase.EVALUATION.value, "Trainer.evaluate (eval_steps)"),
    "_save_checkpoint": (Phase.CHECKPOINT.value, "Trainer._save_checkpoint (save_steps)"),
    "log": (_CALLBACKS, "Trainer.log (logging_steps)"),
}
#: How far up the stack ``on_train_begin`` looks for its Trainer (the callback handler's
#: ``call_event``, its ``on_train_begin``, then the Trainer's training loop).
_TRAINER_FRAMES = 8
#: The arguments noted for the rules, in ``TrainingArguments``' own names.
_ARGUMENTS = (
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "dataloader_num_workers",
    "dataloader_pin_memory",
    "dataloader_persistent_workers",
    "logging_strategy",
    "logging_steps",
    "eval_strategy",
    "eval_steps",
    "save_strategy",
    "save_steps",
    "max_steps",
    "bf16",
    "fp16",
    "torch_compile",
    "gradient_checkpointing",
)


class StepdoctorCallback(TrainerCallback):  # type: ignore[misc]  # transformers is not read (pyproject)
    """Watch a Hugging Face ``Trainer.train()``: its evaluation, saving, logging and callbacks
    timed by name, its arguments noted; a run of its own (with the diagnosis printed at the
    end of ``train()``) unless one is already running (``stepdoctor run``, ``watch()``).

    Args:
        **watch_options: for the run of its own (``stepdoctor.watch``'s: ``out_dir``,
            ``json_path``, ``report``...).
    """

    def __init__(self, **watch_options: Any) -> None:
        self._own = OwnSession(**watch_options)
        self._undo: list[Callable[[], None]] = []

    @guarded
    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Join (or start) the session, find the Trainer and time its parts."""
        self.cleanup()  # a loop begun again (auto_find_batch_size) without its end
        session = self._own.session or self._own.open()
        note_settings(session, "transformers", transformers.__version__, _arguments(args))
        trainer = _calling_trainer()
        if trainer is not None:
            self._undo = _time_trainer(trainer, FrameworkTimer(session), own=self)
        else:
            session.notice(
                "the Hugging Face Trainer was not found from its callback: evaluation, "
                "saving and logging are not timed by name"
            )

    @guarded
    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Put the Trainer back as it was; end the run of its own (its report printed)."""
        self.cleanup()
        self._own.close()

    def cleanup(self) -> None:
        """Put the Trainer and its callbacks back as they were (``train()`` that raised
        called no ``on_train_end``)."""
        while self._undo:
            self._undo.pop()()


def _arguments(args: Any) -> dict[str, Setting]:
    found: dict[str, Setting] = {}
    for name in _ARGUMENTS:
        value = getattr(args, name, None)
        if value is not None and not isinstance(value, str | int | float | bool):
            value = str(getattr(value, "value", value))  # an IntervalStrategy, say
        found[name] = value
    found["report_to"] = ", ".join(getattr(args, "report_to", None) or ()) or "none"
    return found


def _calling_trainer() -> Any:
    """The Trainer whose callback handler called us (None when not found)."""
    frame: FrameType | None = sys._getframe(1)
    for _ in range(_TRAINER_FRAMES):
        if frame is None:
            return None
        candidate = frame.f_locals.get("self")
        if isinstance(candidate, Trainer):
            return candidate
        frame = frame.f_back
    return None


def _time_trainer(trainer: Any, timer: FrameworkTimer, *, own: Any) -> list[Callable[[], None]]:
    """Time the Trainer's ``TIMED_METHODS`` and its other callbacks' events on this Trainer
    alone (instance attributes, deleted again by the undos returned)."""
    undo = [
        time_method(trainer, method, timer, phase, name)
        for method, (phase, name) in TIMED_METHODS.items()
    ]
    handler = getattr(trainer, "callback_handler", None)
    for callback in getattr(handler, "callbacks", ()):
        if callback is own:
            continue
        for event in dir(TrainerCallback):
            if not event.startswith("on_"):
                continue
            overrides = getattr(type(callback), event, None)
            if overrides is None or overrides is getattr(TrainerCallback, event):
                continue  # TrainerCallback's own no-op
            hook = f"{type(callback).__name__}.{event}"
            undo.append(time_method(callback, event, timer, _CALLBACKS, hook))
    return [u for u in undo if u is not None]


def install(session: BaseSession) -> Callable[[], None]:
    """Give every Trainer made from now on a ``StepdoctorCallback`` (which joins the running
    session); return the undo."""
    original_init = Trainer.__init__

    @functools.wraps(original_init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        handler = getattr(self, "callback_handler", None)
        callbacks = getattr(handler, "callbacks", ())
        if not any(isinstance(c, StepdoctorCallback) for c in callbacks):
            self.add_callback(StepdoctorCallback())

    original_train = Trainer.train

    @functools.wraps(original_train)
    def train(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return original_train(self, *args, **kwargs)
        finally:
            for callback in getattr(getattr(self, "callback_handler", None), "callbacks", ()):
                if isinstance(callback, StepdoctorCallback):
                    callback.cleanup()

    Trainer.__init__ = __init__
    Trainer.train = train

    def uninstall() -> None:
        Trainer.__init__ = original_init
        Trainer.train = original_train

    return uninstall
