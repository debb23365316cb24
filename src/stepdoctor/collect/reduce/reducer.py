"""Turn hot-path events into steps, off the hot path (DESIGN.md, "What a step is").

A training step is one parameter update. Step boundaries, in order of precedence:

1. ``explicit``: the user called ``Session.step()``; from then on only those calls end steps.
2. ``optimizer``: the end of a step of the *first* optimizer seen (a GAN's second optimizer, or
   a scheduler, does not end a step). A closure optimizer (LBFGS) runs its forward/backward
   passes inside its step: one step, ``closure_passes`` counted; gradient accumulation puts
   several backward passes (``micro_batches``) before one optimizer step.
3. ``backward``: no optimizer (parameters updated by hand): a step ends where the next
   training pass starts (the loader's next batch is asked for, or a model is called with
   autograd on) after a backward.
4. ``model``: one step per call of the job's first outermost model, for inference-only jobs.

Until the job's kind is known, steps are held back as tentative: model-call steps until a
backward is seen (then the job trains, and they merge into the first step); then
backward-rhythm steps until an optimizer step is seen (which merges them into one step:
accumulation). After ``MODEL_MODE_AFTER_CALLS`` tentative steps, or at the end of the run, the
job is taken as inference-only (no backward) or as updating by hand (backward, no optimizer).

Evaluation: once the job has trained, a call without autograd of a model that has been called
in training (autograd on, train mode) starts an evaluation stretch, which lasts until training
resumes (a training call, a backward, an optimizer step or ``Session.step()``). The owner's
time in it outside other named phases is ``evaluation`` (its data waits too, except the last
one before training resumes, which fetched the training batch). Models never trained (a
frozen teacher, a target network) called without autograd are the step's ``forward``.

Time between events goes to the innermost open phase of the owner thread, or to ``other`` —
except that time in no phase while other threads run the model's forward counts as
``forward`` (the loop is waiting for the model, as with a thread pool serving requests), and
that in a job with no optimizer step time in no phase after a backward, until the next
training pass, is ``optimizer`` (the parameters updated by hand).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from stepdoctor.collect.hooks.events import (
    ENTER,
    EXIT,
    FWD_ENTER,
    FWD_EXIT,
    GC_START,
    GC_STOP,
    OPT_END,
    SAMPLE,
    STEP,
    Event,
    EventBuffer,
)
from stepdoctor.collect.reduce.progress import marks_of
from stepdoctor.model import SETUP_PHASE, Phase, StepTiming
from stepdoctor.record.rows import step_rows_json

__all__ = ["MODEL_MODE_AFTER_CALLS", "ModelCallsRow", "StepReducer"]

#: Model calls without an optimizer step before a job is taken as inference-only. Gradient
#: accumulation over more than 64 micro-batches is rare; 64 tentative steps are ~10 KiB held.
MODEL_MODE_AFTER_CALLS = 64

ModelCallsRow = tuple[object, str, int, int, int, int, int, int, int, int, int]
"""``(model_id, class_name, calls, threads, max_concurrent, concurrent_calls, solo_ns,
solo_calls, concurrent_ns, grad_calls, train_mode_calls)``: one model's forward calls."""

_OTHER = Phase.OTHER.value
_FORWARD = Phase.FORWARD.value
_OPTIMIZER = Phase.OPTIMIZER.value
_BACKWARD = Phase.BACKWARD.value
_DATA_WAIT = Phase.DATA_WAIT.value
_EVALUATION = Phase.EVALUATION.value
#: Modes in which no optimizer step has been seen: a loop that may update its parameters by
#: hand, whose time after a backward pass (outside other phases) is that update.
_BY_HAND = (None, "backward")


class _Open:
    """The step being accumulated (a plain slotted class: one is made per step)."""

    __slots__ = (
        "batch_size",
        "closure_passes",
        "eval_calls",
        "gc_count",
        "gc_max_pause_ns",
        "gc_pause_ns",
        "gc_phase_ns",
        "micro_batches",
        "phase_ns",
        "start_ns",
    )

    def __init__(self, start_ns: int) -> None:
        self.start_ns = start_ns
        self.phase_ns: dict[str, int] = {}
        self.batch_size: int | None = None
        self.gc_count = 0
        self.gc_pause_ns = 0
        self.gc_max_pause_ns = 0
        self.gc_phase_ns: dict[str, int] = {}
        self.micro_batches = 0
        self.closure_passes = 0
        self.eval_calls = 0

    def merge(self, other: _Open) -> None:
        for name, ns in other.phase_ns.items():
            self.phase_ns[name] = self.phase_ns.get(name, 0) + ns
        self.batch_size = self.batch_size or other.batch_size
        self.micro_batches += other.micro_batches
        self.closure_passes += other.closure_passes
        self.eval_calls += other.eval_calls
        self.gc_count += other.gc_count
        self.gc_pause_ns += other.gc_pause_ns
        self.gc_max_pause_ns = max(self.gc_max_pause_ns, other.gc_max_pause_ns)
        for name, ns in other.gc_phase_ns.items():
            self.gc_phase_ns[name] = self.gc_phase_ns.get(name, 0) + ns


@dataclass(slots=True)
class _ModelCalls:
    class_name: str
    calls: int = 0
    threads: set[int] = field(default_factory=set)
    active: dict[int, tuple[int, bool]] = field(default_factory=dict)
    max_concurrent: int = 0
    concurrent_calls: int = 0
    solo_ns: int = 0
    solo_calls: int = 0
    concurrent_ns: int = 0
    grad_calls: int = 0
    train_mode_calls: int = 0


class StepReducer:
    """Consume events in order; hand out finished steps.

    Args:
        owner_thread: the thread whose phases make up steps (the training loop's thread).
        model_names: ``id(model) -> class name`` (looked up lazily, may grow).
        keep_steps: keep the finished steps for ``take_steps`` (else only their rows and
            progress marks are handed out).
    """

    def __init__(
        self,
        owner_thread: int,
        model_names: dict[int, str] | None = None,
        *,
        keep_steps: bool = True,
    ) -> None:
        self.owner_thread = owner_thread
        self._keep_steps = keep_steps
        self.mode: str | None = None
        self.model_names = model_names if model_names is not None else {}
        self._boundary_optimizer: object = None
        self._stack: list[str] = []
        self._open: _Open | None = None
        self._last_t = 0
        self._tentative: list[tuple[_Open, int]] = []
        self._done: list[StepTiming] = []
        self._unrowed: list[StepTiming] = []
        """The steps made since the last ``take_rows()``."""
        self._unmarked: list[StepTiming] = []
        """The steps made since the last ``take_marks()``."""
        self._next_index = 0
        self._gc_start: int | None = None
        self._models: dict[int, _ModelCalls] = {}
        self._foreign_forwards = 0
        self._trained = False
        """A backward pass was seen on the owner thread: the job trains."""
        self._trained_models: set[object] = set()
        """Models the owner called with autograd on in train mode."""
        self._first_model: object = None
        """The first model the owner called (its calls are the inference steps)."""
        self._after_backward = False
        """A backward ended since the last backward-rhythm boundary."""
        self._eval = False
        """Inside an evaluation stretch."""
        self._eval_tail_ns = 0
        """Data-wait time charged to ``evaluation`` since the stretch's last model call."""
        self._sample_phases: list[tuple[object, str]] = []
        """(sample id, phase) of the SAMPLE events since the last ``take_sample_phases``."""

    def feed(self, events: Iterable[Event]) -> None:
        """Process events (in the order they were appended).

        This loop runs on the monitor thread for ~10 events a step, so the open step and the
        time of the last event are kept in locals (written back around the rarer calls that
        read them) and the charge of elapsed time to the open phase is inline
        (docs/overhead.md).
        """
        owner = self.owner_thread
        stack = self._stack
        step = self._open
        last_t = self._last_t
        try:
            for t, code, arg, tid in events:
                if code >= FWD_ENTER:
                    if code >= GC_START:
                        self._open, self._last_t = step, last_t
                        if code == GC_START:
                            self._gc_start = t
                        elif code == GC_STOP:
                            self._gc_stop(t, tid == owner)
                        elif code == SAMPLE:
                            self._sample_phases.append((arg, self._phase_at(t)))
                        elif step is not None:  # RESET: drop what the open step holds
                            step = _Open(start_ns=t)
                            last_t = t
                            self._eval_tail_ns = 0
                        continue
                    # FWD_ENTER or FWD_EXIT
                    if tid != owner:
                        if step is not None:
                            self._open, self._last_t = step, last_t
                            step = self._charge(t)
                            last_t = self._last_t
                        self._foreign_forwards += 1 if code == FWD_ENTER else -1
                    if type(arg) is int:
                        self._concurrency(t, code, arg, tid)
                if tid != owner:
                    continue
                if step is None:
                    step = _Open(start_ns=t)
                    last_t = t
                elif t > last_t:
                    phase = stack[-1] if stack else _OTHER
                    if self._eval and phase in (_OTHER, _DATA_WAIT):
                        if phase == _DATA_WAIT:
                            self._eval_tail_ns += t - last_t
                        phase = _EVALUATION
                    elif phase == _OTHER and self._after_backward and self.mode in _BY_HAND:
                        phase = _OPTIMIZER  # the parameters updated by hand
                    elif phase == _OTHER and self._foreign_forwards > 0:
                        # The loop's thread waits while other threads run the model: model time.
                        phase = _FORWARD
                    phase_ns = step.phase_ns
                    phase_ns[phase] = phase_ns.get(phase, 0) + (t - last_t)
                    last_t = t
                if code == ENTER:
                    name = str(arg)
                    if name in (_BACKWARD, _OPTIMIZER, _DATA_WAIT):
                        self._open, self._last_t = step, last_t
                        self._training_event(t, name)
                        step = self._open
                    stack.append(name)
                elif code == EXIT:
                    if stack and stack.pop() == _BACKWARD:
                        self._after_backward = True
                    if type(arg) is int:
                        step.batch_size = arg
                elif code == FWD_ENTER:
                    self._open, self._last_t = step, last_t
                    stack.append(self._model_call(t, arg))
                    step = self._open
                elif code in (OPT_END, FWD_EXIT, STEP):
                    self._open, self._last_t = step, last_t
                    if code == OPT_END:
                        if stack:
                            stack.pop()
                        self._optimizer_boundary(t, arg)
                    elif code == FWD_EXIT:
                        popped = stack.pop() if stack else None
                        if popped == _EVALUATION:
                            self._eval_tail_ns = 0
                        elif arg == self._first_model:
                            self._model_boundary(t)
                    else:
                        self._end_eval()
                        self.mode = "explicit"
                        if isinstance(arg, int):
                            step.batch_size = arg
                        self._close(t, "explicit")
                    step = self._open
        finally:  # an event that raised leaves the state of the ones before it
            self._open, self._last_t = step, last_t

    def drain(self, events: EventBuffer) -> None:
        """``feed`` everything appended to ``events`` so far, taking it out."""
        self.feed(events.take())

    def take_steps(self) -> list[StepTiming]:
        """Return the steps finished since the last call."""
        done, self._done = self._done, []
        return done

    def take_rows(self) -> bytes:
        """Return the record rows of the steps made since the last call (``step_rows_json``:
        comma-separated JSON arrays; empty when there are none)."""
        steps, self._unrowed = self._unrowed, []
        return step_rows_json(steps) if steps else b""

    def take_marks(self) -> bytes:
        """Return the progress marks of the steps made since the last call (``marks_of``)."""
        steps, self._unmarked = self._unmarked, []
        return marks_of(steps)

    def take_sample_phases(self) -> list[tuple[object, str]]:
        """Return ``(sample id, phase)`` of the SAMPLE events fed since the last call: the
        phase the owner thread's time was being charged to when each sample was taken
        (``SETUP_PHASE`` before its first event; "" when an event of the owner came between
        the time the sample was due and the sample)."""
        taken, self._sample_phases = self._sample_phases, []
        return taken

    def finish(self) -> list[StepTiming]:
        """Settle tentative model steps (the job is inference-only) and return what is left.

        The step still open at the end (time after the last boundary) is dropped: it is not a
        whole step; except in a job updating by hand, whose last pass (a backward in it) is
        a step ending at the owner thread's last event.
        """
        if self.mode is None and self._trained:
            self._settle_backward_mode()
        elif self.mode is None and self._tentative:
            self._settle_model_mode()
        if self.mode == "backward" and self._open is not None and self._open.micro_batches:
            # The last pass has no next one to end it: it ends at the owner's last event.
            self._close(self._last_t, "backward")
        return self.take_steps()

    def model_calls(self) -> list[ModelCallsRow]:
        """Return the per-model counts (``ModelCallsRow``), in the order models were seen."""
        return [
            (
                model_id, c.class_name, c.calls, len(c.threads), c.max_concurrent,
                c.concurrent_calls, c.solo_ns, c.solo_calls, c.concurrent_ns, c.grad_calls,
                c.train_mode_calls,
            )
            for model_id, c in self._models.items()
        ]  # fmt: skip

    # -- internals ---------------------------------------------------------------------

    def _phase_at(self, t: int) -> str:
        """The phase a sample due at ``t`` fell in: the one the owner's time is charged to now
        (``_charged_phase``), or "" when the owner appended an event after ``t`` (the sample
        straddles it: stacks.py)."""
        if self._open is None:
            return SETUP_PHASE
        return "" if t < self._last_t else self._charged_phase()

    def _charged_phase(self) -> str:
        """The phase the owner's time goes to now: its innermost open phase, except that in
        an evaluation stretch time outside phases and data waits are ``evaluation``; after a
        backward in a job updating by hand, time outside phases is ``optimizer`` (the
        parameters updated by hand); and while other threads run the model, it is
        ``forward`` (the loop waits for the model). ``feed`` inlines the same choice."""
        phase = self._stack[-1] if self._stack else _OTHER
        if self._eval and phase in (_OTHER, _DATA_WAIT):
            return _EVALUATION
        if phase == _OTHER and self._after_backward and self.mode in _BY_HAND:
            return _OPTIMIZER
        if phase == _OTHER and self._foreign_forwards > 0:
            return _FORWARD
        return phase

    def _charge(self, t: int) -> _Open:
        step = self._open
        if step is None:
            step = self._open = _Open(start_ns=t)
            self._last_t = t
            return step
        if t > self._last_t:
            phase = self._charged_phase()
            if phase == _EVALUATION and self._stack and self._stack[-1] == _DATA_WAIT:
                self._eval_tail_ns += t - self._last_t
            step.phase_ns[phase] = step.phase_ns.get(phase, 0) + (t - self._last_t)
            self._last_t = t
        return step

    def _training_event(self, t: int, name: str) -> None:
        """The owner enters ``backward``, ``optimizer`` or ``data_wait``."""
        step = self._open
        if name == _DATA_WAIT:
            if self._after_backward:
                self._rhythm_boundary(t)
            return
        self._end_eval()
        if name == _OPTIMIZER:
            return
        if _OPTIMIZER in self._stack:
            if step is not None:
                step.closure_passes += 1
        elif step is not None:
            step.micro_batches += 1
        if not self._trained:
            self._trained = True
            self._start_training()
        elif self.mode == "model":  # inference first, then training: steps from here
            self.mode = None

    def _start_training(self) -> None:
        """The first backward: the model-call steps held back were this first step's."""
        if self.mode == "model":
            self.mode = None
        elif self.mode is None and self._tentative and self._open is not None:
            first = self._tentative[0][0]
            for step, _ in self._tentative[1:]:
                first.merge(step)
            first.merge(self._open)
            self._open = first
            self._tentative = []

    def _model_call(self, t: int, arg: object) -> str:
        """The owner calls a model (``arg``: ``fwd_arg``): the phase it enters."""
        if type(arg) is not int:
            return _FORWARD
        model_id, grad, training = arg >> 2, arg & 2, arg & 1
        if self._first_model is None:
            self._first_model = model_id
        if grad and training:
            self._trained_models.add(model_id)
        elif not grad and self._trained and model_id in self._trained_models:
            if not self._eval:
                self._eval = True
                self._eval_tail_ns = 0
            if model_id == self._first_model and self._open is not None:
                self._open.eval_calls += 1
            return _EVALUATION
        if grad:
            self._end_eval()
            if self._after_backward:
                self._rhythm_boundary(t)
        return _FORWARD

    def _end_eval(self) -> None:
        """Training resumes: the stretch's last data wait fetched the training batch."""
        if not self._eval:
            return
        self._eval = False
        tail, self._eval_tail_ns = self._eval_tail_ns, 0
        step = self._open
        if tail and step is not None:
            phases = step.phase_ns
            phases[_EVALUATION] -= tail
            phases[_DATA_WAIT] = phases.get(_DATA_WAIT, 0) + tail
            if not phases[_EVALUATION]:
                del phases[_EVALUATION]

    def _rhythm_boundary(self, t: int) -> None:
        """A training pass starts after a backward: a step boundary when updating by hand."""
        self._after_backward = False
        if self.mode == "backward":
            self._close(t, "backward")
        elif self.mode is None and self._trained and self._open is not None:
            self._tentative.append((self._open, t))
            self._open = _Open(start_ns=t)
            if len(self._tentative) >= MODEL_MODE_AFTER_CALLS:
                self._settle_backward_mode()
        else:
            return
        self._eval_tail_ns = 0

    def _settle_backward_mode(self) -> None:
        self.mode = "backward"
        for step, end in self._tentative:
            self._emit(step, end, "backward")
        self._tentative = []

    def _gc_stop(self, t: int, on_owner: bool) -> None:
        if self._gc_start is None:
            return
        pause = t - self._gc_start
        self._gc_start = None
        step = self._open
        if step is None:
            return
        step.gc_count += 1
        step.gc_pause_ns += pause
        step.gc_max_pause_ns = max(step.gc_max_pause_ns, pause)
        if on_owner:
            phase = self._stack[-1] if self._stack else _OTHER
            step.gc_phase_ns[phase] = step.gc_phase_ns.get(phase, 0) + pause

    def _model_boundary(self, t: int) -> None:
        if self.mode == "model":
            self._close(t, "model")
        elif self.mode is None and not self._trained and self._open is not None:
            self._tentative.append((self._open, t))
            self._open = _Open(start_ns=t)
            if len(self._tentative) >= MODEL_MODE_AFTER_CALLS:
                self._settle_model_mode()

    def _settle_model_mode(self) -> None:
        self.mode = "model"
        for step, end in self._tentative:
            self._emit(step, end, "model")
        self._tentative = []

    def _optimizer_boundary(self, t: int, optimizer_id: object) -> None:
        if self.mode == "explicit":
            return
        if self._boundary_optimizer is None:
            self._boundary_optimizer = optimizer_id
        elif optimizer_id != self._boundary_optimizer:
            return
        if self.mode != "optimizer":
            self.mode = "optimizer"
            if self._tentative and self._open is not None:
                first = self._tentative[0][0]
                for step, _ in self._tentative[1:]:
                    first.merge(step)
                first.merge(self._open)
                self._open = first
            self._tentative = []
        self._close(t, "optimizer")

    def _close(self, t: int, boundary: str) -> None:
        if self._open is None:
            return
        self._emit(self._open, t, boundary)
        self._open = _Open(start_ns=t)

    def _emit(self, step: _Open, end: int, boundary: str) -> None:
        timing = StepTiming(
            index=self._next_index,
            start_ns=step.start_ns,
            end_ns=end,
            boundary=boundary,
            batch_size=step.batch_size,
            phase_ns=step.phase_ns,  # the _Open is dropped after this: no copy
            gc_count=step.gc_count,
            gc_pause_ns=step.gc_pause_ns,
            gc_max_pause_ns=step.gc_max_pause_ns,
            gc_phase_ns=step.gc_phase_ns,
            micro_batches=step.micro_batches,
            closure_passes=step.closure_passes,
            eval_calls=step.eval_calls,
        )
        if self._keep_steps:
            self._done.append(timing)
        self._unrowed.append(timing)
        self._unmarked.append(timing)
        self._next_index += 1

    def _concurrency(self, t: int, code: int, arg: int, tid: int) -> None:
        # events.split_fwd_arg, inline: it runs once per model call
        model_id = arg >> 2 if code == FWD_ENTER else arg
        calls = self._models.get(model_id)
        if calls is None:
            calls = self._models[model_id] = _ModelCalls(
                class_name=self.model_names.get(model_id, "?")
            )
        active = calls.active
        if code == FWD_ENTER:
            overlapped = bool(active)
            if overlapped:
                calls.active = active = {k: (s, True) for k, (s, _) in active.items()}
            active[tid] = (t, overlapped)
            calls.calls += 1
            calls.grad_calls += arg >> 1 & 1
            calls.train_mode_calls += arg & 1
            calls.threads.add(tid)
            calls.max_concurrent = max(calls.max_concurrent, len(active))
            return
        started = active.pop(tid, None)
        if started is None:
            return
        start, overlapped = started
        if overlapped:
            calls.concurrent_calls += 1
            calls.concurrent_ns += t - start
        else:
            calls.solo_calls += 1
            calls.solo_ns += t - start
