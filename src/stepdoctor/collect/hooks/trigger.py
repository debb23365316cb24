"""Run an experiment once, in the job's own thread, at an optimizer-step boundary.

``stepdoctor run --experiments`` pauses the job after its warm-up: the optimizer's post-step
hook calls ``ExperimentTrigger.run``, which hands the job's own objects (its model, the loader
of the batch it last took, that batch) to the experiment callback. The callback comes from the
caller (the CLI builds it from ``stepdoctor.experiments``), so collection does not depend on
the experiments. The time spent is taken out of the job's steps (a RESET event).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from stepdoctor.collect.hooks.batches import batch_size_of
from stepdoctor.model import WARMUP_SAMPLES

__all__ = [
    "EXPERIMENT_AFTER_SAMPLES",
    "EXPERIMENT_AFTER_STEPS",
    "ExperimentObjects",
    "ExperimentTrigger",
    "FirstOptimizerSteps",
    "ObjectKeeper",
    "StepLimit",
    "StepLimitReached",
]

logger = logging.getLogger(__name__)

#: The experiment waits for the warm-up the rules skip (``WARMUP_SAMPLES``: SageMaker
#: Debugger's first 1,000 samples) and for at least this many steps (workers started,
#: allocator warm).
EXPERIMENT_AFTER_STEPS = 30
EXPERIMENT_AFTER_SAMPLES = WARMUP_SAMPLES


class FirstOptimizerSteps:
    """Counts the steps of the first optimizer seen: the job's others (a GAN's second
    optimizer, say) step through the same post-step hook and are not its steps."""

    def __init__(self) -> None:
        self._optimizer: int | None = None
        self.count = 0

    def step(self, optimizer: object) -> bool:
        """Count ``optimizer``'s step if it is the first optimizer; whether it was."""
        if self._optimizer is None:
            self._optimizer = id(optimizer)
        elif id(optimizer) != self._optimizer:
            return False
        self.count += 1
        return True


@dataclass(frozen=True)
class ExperimentObjects:
    """The job's live objects an experiment measures with."""

    model: Any
    loader: Any
    batch: Any
    steps_before: int


class ExperimentTrigger:
    """Counts the first optimizer's steps; once due, runs ``callback`` once.

    Args:
        callback: measures with the objects; returns results (kept in ``results``) and notes
            (why something was skipped, kept in ``notes``).
    """

    def __init__(
        self,
        callback: Callable[[ExperimentObjects], tuple[list[Any], list[str]]],
        *,
        after_steps: int = EXPERIMENT_AFTER_STEPS,
        after_samples: int = EXPERIMENT_AFTER_SAMPLES,
    ) -> None:
        self._callback = callback
        self._after_steps = after_steps
        self._after_samples = after_samples
        self._steps = FirstOptimizerSteps()
        self._samples = 0
        self._batch: Any = None
        # Strong references until the experiment ran: a loader written inline
        # (``for x in DataLoader(...)``) is referenced by nothing else.
        self._iterator_loader: tuple[int, Any] | None = None
        self._loader: Any = None
        self._models: list[weakref.ref[Any]] = []
        self.done = False
        """The experiment started (it runs once)."""
        self.pauses = True
        """It pauses the job to run (an ``ObjectKeeper`` does not)."""
        self.finished = False
        """It ended: ``results`` and ``notes`` are final (the monitor reads them then)."""
        self.results: list[Any] = []
        self.notes: list[str] = []

    # -- called from the hot path (patched torch) ------------------------------------------

    def saw_iterator(self, iterator: Any, loader: Any) -> None:
        """A DataLoader made a new iterator."""
        if not self.done:
            self._iterator_loader = (id(iterator), loader)

    def saw_batch(self, iterator: Any, batch: Any) -> None:
        """The job took a batch from ``iterator``."""
        if self.done:
            return
        self._batch = batch
        if self._iterator_loader is not None and self._iterator_loader[0] == id(iterator):
            self._loader = self._iterator_loader[1]
        self._samples += batch_size_of(batch) or 0

    def saw_model(
        self, model: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> None:
        """An outermost model was called for the first time (with ``args`` / ``kwargs``)."""
        self._models.append(weakref.ref(model))

    def due(self, optimizer: object) -> bool:
        """Count a step of the first optimizer; True once, when the experiment should run."""
        if self.done:
            return False
        if not self._steps.step(optimizer):
            return False
        return self._steps.count >= self._after_steps and self._samples >= self._after_samples

    def run(self) -> None:
        """Run the experiment now (in the job's thread); never raises."""
        self.done = True
        try:
            self._run()
        finally:
            self.finished = True

    def _run(self) -> None:
        batch, self._batch = self._batch, None
        model = self._main_model()
        loader, self._loader, self._iterator_loader = self._loader, None, None
        if model is None or batch is None:
            self.notes.append("experiments skipped: no model or no batch was seen")
            return
        try:
            results, notes = self._callback(
                ExperimentObjects(
                    model=model, loader=loader, batch=batch, steps_before=self._steps.count
                )
            )
        except Exception as exc:  # the job goes on whatever the experiment did
            logger.debug("experiment failed", exc_info=True)
            self.notes.append(f"experiments failed: {type(exc).__name__}: {exc}")
            return
        self.results.extend(results)
        self.notes.extend(notes)

    def _main_model(self) -> Any:
        best, best_params = None, -1
        for ref in self._models:
            model = ref()
            if model is None:
                continue
            params = sum(int(p.numel()) for p in model.parameters())
            if params > best_params:
                best, best_params = model, params
        return best if best_params > 0 else None


class ObjectKeeper(ExperimentTrigger):
    """Keeps the job's model, the loader of its last batch and that batch for after the job
    ends (``stepdoctor run --verify``): it never pauses the job."""

    def __init__(self) -> None:
        super().__init__(lambda objects: ([], []))
        self.pauses = False
        self._kept: list[Any] = []
        self._inputs: dict[int, Any] = {}

    def due(self, optimizer: object) -> bool:
        """Never: the trials run after the job."""
        return False

    def saw_model(
        self, model: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> None:
        """Keep a strong reference (the job's own may be gone when it ends), and the input of
        its first call: the batch of a job that feeds it without a DataLoader."""
        self._kept.append(model)
        if kwargs:
            self._inputs[id(model)] = dict(kwargs)
        elif len(args) == 1:
            self._inputs[id(model)] = args[0]
        elif args:
            self._inputs[id(model)] = tuple(args)
        super().saw_model(model, args, kwargs)

    def objects(self) -> ExperimentObjects | None:
        """The objects the job used last; None when it used no model or no batch."""
        model = self._main_model()
        batch = self._batch if self._batch is not None else self._inputs.get(id(model))
        if model is None or batch is None:
            return None
        return ExperimentObjects(model=model, loader=self._loader, batch=batch, steps_before=0)

    def release(self) -> None:
        """Drop every reference kept."""
        self._kept.clear()
        self._inputs.clear()
        self._models.clear()
        self._batch = self._loader = self._iterator_loader = None


class StepLimitReached(BaseException):
    """Raised from the optimizer hook to end a tuning run after its steps. A BaseException,
    like KeyboardInterrupt, so a training loop's ``except Exception`` does not swallow it."""


class StepLimit:
    """Ends the job after ``steps`` steps of its first optimizer (``stepdoctor tune``)."""

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self._counted = FirstOptimizerSteps()

    def check(self, optimizer: object) -> None:
        """Count a step; raise StepLimitReached when the limit is reached."""
        if self._counted.step(optimizer) and self._counted.count >= self.steps:
            raise StepLimitReached(f"tuning run: {self.steps} steps done")
