"""TensorFlow's hand-written training loops (``tf.GradientTape``), watched unmodified::

    for x, y in dataset:            # data_wait: the tf.data iterator's next batch
        train_step(x, y)            # a tf.function whose graph applies the gradients:
                                    # train_step, one step per call

A step ends with each call of a ``tf.function`` whose graph applies gradients (its trace
called a Keras optimizer's ``apply_gradients`` or ``apply``): the outermost such function
called from Python, timed as ``train_step`` (forward, backward and update compiled in one
call). In an eager loop a step ends with each ``apply_gradients`` (``optimizer``); the
model's call is ``forward``, the tape's ``gradient`` ``backward``. The wait for each batch
is the tf.data iterator's ``next`` (``data_wait``), the pipeline described in tf.data's terms
(``_tfdata.describe``) for the input-bound fix; the samples of a step are its batch's leading
dimension; the model (its layers' sizes and dtypes) is described from Keras's layers at its
first call.

Keras's own loops (``fit``: ``integrations/keras.py``) are left to their integration: nothing
here counts while one runs. Installed under ``stepdoctor run`` when the job imports
TensorFlow; the optimizer and model hooks once it has imported Keras on TensorFlow's backend
(seen at TensorFlow's next call: Keras imports TensorFlow while it is itself being imported).
"""

from __future__ import annotations

import functools
import logging
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any

from stepdoctor.collect.hooks.batches import batch_size_of
from stepdoctor.collect.hooks.session import BaseSession
from stepdoctor.integrations._tfsetup import tensorflow_settings
from stepdoctor.integrations._timing import (
    FrameworkTimer,
    in_framework_loop,
    note_settings,
    patch_class,
)
from stepdoctor.model import NEW_ITERATOR, Phase

__all__ = ["CustomLoops", "install"]

logger = logging.getLogger(__name__)

_DATA_WAIT = Phase.DATA_WAIT.value
_TRAIN_STEP = Phase.TRAIN_STEP.value
_FORWARD = Phase.FORWARD.value
_BACKWARD = Phase.BACKWARD.value
_OPTIMIZER = Phase.OPTIMIZER.value


class CustomLoops:
    """The steps of hand-written loops, found from the calls of TensorFlow and Keras that make
    them; its methods are the hooks' bodies (each a clock read and an append, or nothing)."""

    def __init__(self, session: BaseSession, tf: Any) -> None:
        self._session = session
        self._timer = FrameworkTimer(session)
        self._tf = tf
        self._local = threading.local()
        self._steps_fns: weakref.WeakSet[Any] = weakref.WeakSet()
        self._batch: Any = None
        """The loop's last batch from a tf.data iterator (an eager step's samples)."""
        self._noted = False
        self._described: weakref.WeakSet[Any] = weakref.WeakSet()
        self._models = threading.local()
        self._forward_open = False
        """An eager forward entered and not yet left (the loop's thread: eager steps run on
        the thread that calls them)."""
        self._last_dataset: Any = None
        self._train_dataset: weakref.ref[Any] | None = None
        self.settings: dict[str, Any] = {}
        self.on_keras: Callable[[Any], None] | None = None
        """Hooks Keras's optimizers and models (``install``), once Keras is imported."""

    # -- the thread's stack of tf.function calls ----------------------------------------
    def _stack(self) -> list[Any]:
        stack: list[Any] | None = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def _keras(self) -> None:
        """Hook Keras once it is imported on TensorFlow's backend: checked at TensorFlow's
        calls (Keras imports TensorFlow while it is itself only partly imported, so its
        import is no time to hook it)."""
        hook = self.on_keras
        keras = sys.modules.get("keras")
        if hook is None or keras is None:
            return
        try:
            backend = keras.backend.backend()
            keras.optimizers.Optimizer, keras.Model  # noqa: B018 - imported in full
        except AttributeError:  # still being imported
            return
        self.on_keras = None
        if backend == "tensorflow":
            try:
                hook(keras)
            except Exception as exc:  # the loop runs on, its Keras parts unhooked
                logger.warning("stepdoctor: could not hook Keras's optimizers: %r", exc)

    def _in_python(self) -> bool:
        """Called from the job's Python itself: no tf.function being traced or run on this
        thread, no framework loop running."""
        return not self._stack() and not in_framework_loop()

    # -- hooks ------------------------------------------------------------------------
    def function_call(self, original: Callable[..., Any], fn: Any, args: Any, kw: Any) -> Any:
        """A ``tf.function`` is called: a step where its graph applies gradients (counted
        where the call returned)."""
        if self.on_keras is not None:
            self._keras()
        stack = self._stack()
        outer = not stack and not in_framework_loop()
        known = outer and fn in self._steps_fns
        phase = _TRAIN_STEP if known else None
        stack.append(fn)
        timer = self._timer
        if phase is not None:
            timer.enter(phase)
        try:
            result = original(fn, *args, **kw)
        finally:
            if phase is not None:
                timer.leave()
            stack.pop()
        if outer and fn in self._steps_fns:
            self._step(batch_size_of(args), fn)
        return result

    def applied(self, original: Callable[..., Any], optimizer: Any, args: Any, kw: Any) -> Any:
        """A Keras optimizer applies gradients: in a graph being traced, its function is a
        step's; called eagerly from the job's loop, a step ends after it."""
        if getattr(self._local, "applying", False):  # apply_gradients calls apply
            return original(optimizer, *args, **kw)
        self._local.applying = True
        try:
            if in_framework_loop() or not self._tf.executing_eagerly():
                stack = self._stack()
                if stack and not in_framework_loop():
                    self._steps_fns.add(stack[0])  # the outermost: called from the loop
                # else: a graph traced off the loop's thread (a strategy's replicas) or
                # outside a call (get_concrete_function): no step of its own
                return original(optimizer, *args, **kw)
            if self._stack():
                return original(optimizer, *args, **kw)
            self._end_forward()
            self._timer.enter(_OPTIMIZER)
            try:
                result = original(optimizer, *args, **kw)
            finally:
                self._timer.leave()
            self._step(batch_size_of(self._batch), None)  # an update that raised is none
            return result
        finally:
            self._local.applying = False

    def next_batch(self, original: Callable[..., Any], iterator: Any) -> Any:
        """The loop takes its next batch from a tf.data iterator: its wait."""
        if self.on_keras is not None:
            self._keras()
        dataset = getattr(iterator, "_dataset", None)
        if not self._in_python() or not self._training(dataset):
            return original(iterator)
        self._last_dataset = dataset
        self._end_forward()
        self._timer.enter(_DATA_WAIT)
        try:
            batch = original(iterator)
        finally:
            self._timer.leave()
        self._batch = batch  # its size read at an eager step's end, off the fetch
        return batch

    def new_iterator(self, original: Callable[..., Any], dataset: Any) -> Any:
        """The loop makes an iterator of a tf.data pipeline (each epoch's ``for x in
        dataset``): tf.data rewrites the pipeline's graph and starts its threads, which the
        loop waits for; timed as ``data_wait`` and by name."""
        if self.on_keras is not None:
            self._keras()
        if not self._in_python() or not self._tf.executing_eagerly() or not self._training(dataset):
            return original(dataset)
        self._end_forward()
        timer = self._timer
        began = timer.clock()
        timer.enter(_DATA_WAIT)
        try:
            return original(dataset)
        finally:
            timer.leave()
            timer.hook(NEW_ITERATOR, _DATA_WAIT, timer.clock() - began)

    def timed(
        self, phase: str, original: Callable[..., Any], owner: Any, args: Any, kw: Any
    ) -> Any:
        """An eager call of the model or the tape's ``gradient`` from the job's loop. As for
        torch's steps, ``forward`` runs from the model's call to the backward (the loss
        computed on its outputs is the forward's): left open at the call's return, closed by
        the next of ``gradient`` (``backward``), the update, a fetch or the step's end. A model
        is described at its first call."""
        if self.on_keras is not None:
            self._keras()
        depth = getattr(self._models, "depth", 0)  # models called inside a model's call
        self._models.depth = depth + 1
        try:
            if depth or not self._in_python() or not self._tf.executing_eagerly():
                result = original(owner, *args, **kw)
            elif phase == _FORWARD:
                if not self._forward_open:
                    self._forward_open = True
                    self._timer.enter(_FORWARD)
                result = original(owner, *args, **kw)
            else:
                self._end_forward()
                self._timer.enter(phase)
                try:
                    result = original(owner, *args, **kw)
                finally:
                    self._timer.leave()
        finally:
            self._models.depth = depth
        if phase == _FORWARD and not depth:
            self._describe(owner)  # after the call: a model builds its weights at its first
        return result

    # -- bookkeeping (once per run, or per new model or pipeline) --------------------------
    def _end_forward(self) -> None:
        """Close an eager forward left open (``timed``)."""
        if self._forward_open:
            self._forward_open = False
            self._timer.leave()

    def _step(self, batch: int | None, fn: Any) -> None:
        self._end_forward()
        try:
            if not self._noted:
                self._noted = True
                self._pipeline(self._last_dataset)
                self._note(fn)
        except Exception as exc:  # our bookkeeping: logged once, never the job's error
            logger.warning("stepdoctor: could not note the loop's settings: %r", exc)
        self._timer.step(batch if batch is not None else batch_size_of(self._batch))

    def _note(self, fn: Any) -> None:
        """The loop's settings, at its first step: the framework (so the fixes speak
        TensorFlow's terms), how steps are found, and the pipeline read so far."""
        tf = self._tf
        name = getattr(getattr(fn, "python_function", None), "__name__", None)
        settings = {
            "loop": "custom",
            "step_function": name,
            "eager": fn is None,
            **tensorflow_settings(tf),
            **self.settings,
        }
        note_settings(self._session, "tensorflow", tf.__version__, settings)

    def _training(self, dataset: Any) -> bool:
        """Whether ``dataset`` feeds the training steps: the one whose batch the first step
        took (unknown before it: any); another one's batches (a validation loop's) are not
        the steps' wait."""
        known = self._train_dataset
        return known is None or dataset is None or known() is dataset

    def _pipeline(self, dataset: Any) -> None:
        """The training pipeline (the one the first step took its batch from), described."""
        if dataset is None:
            return
        self._train_dataset = weakref.ref(dataset)
        from stepdoctor.integrations import _tfdata

        try:
            self.settings.update(_tfdata.describe(dataset))
        except Exception as exc:  # a pipeline we cannot read: the fix stays general
            logger.debug("stepdoctor: could not describe a tf.data pipeline: %r", exc)

    def _describe(self, model: Any) -> None:
        if in_framework_loop() or model in self._described:
            return
        self._described.add(model)
        from stepdoctor.integrations.keras import describe_model

        described = describe_model(model)
        if described is not None:
            self._session.framework_models.append(described)


def install(session: BaseSession) -> Callable[[], None]:
    """Hook TensorFlow's ``tf.function`` calls and tf.data iterators for ``session``, and
    Keras's optimizers, model calls and ``GradientTape.gradient`` once Keras is imported on
    TensorFlow's backend; return the undo."""
    import tensorflow as tf
    from tensorflow.python.data.ops import iterator_ops
    from tensorflow.python.eager.polymorphic_function import polymorphic_function

    loops = CustomLoops(session, tf)
    undo: list[Callable[[], None]] = []
    undo.append(_wrap(polymorphic_function.Function, "__call__", loops.function_call))
    undo.append(_wrap(iterator_ops.OwnedIterator, "__next__", loops.next_batch, with_args=False))
    undo.append(_wrap(tf.data.Dataset, "__iter__", loops.new_iterator, with_args=False))
    undo.append(
        _wrap(
            tf.GradientTape, "gradient",
            functools.partial(loops.timed, _BACKWARD),
        )
    )  # fmt: skip
    loops.on_keras = lambda keras: undo.extend(
        [
            _wrap(keras.optimizers.Optimizer, "apply_gradients", loops.applied),
            _wrap(keras.optimizers.Optimizer, "apply", loops.applied),
            _wrap(keras.Model, "__call__", functools.partial(loops.timed, _FORWARD)),
        ]
    )

    def uninstall() -> None:
        loops.on_keras = None
        while undo:
            undo.pop()()

    return uninstall


def _wrap(
    owner: type, name: str, hook: Callable[..., Any], *, with_args: bool = True
) -> Callable[[], None]:
    """Set on the class ``owner`` a wrapper of its method ``name`` that hands each call to
    ``hook`` (with the original, the instance and, ``with_args``, the call's arguments);
    return the undo (``patch_class``'s)."""
    original = getattr(owner, name)

    if with_args:

        @functools.wraps(original)
        def wrapper(self: Any, *args: Any, **kw: Any) -> Any:
            return hook(original, self, args, kw)

    else:

        @functools.wraps(original)
        def wrapper(self: Any) -> Any:
            return hook(original, self)

    return patch_class(owner, name, wrapper)
