"""Keras 3 (``model.fit``; on the torch backend torch's hooks see its forward and backward).

::

    model.fit(x, y, callbacks=[StepdoctorCallback()])   # or: stepdoctor run train.py

A step is one batch of ``fit``, from its ``on_train_batch_begin`` to the next one's. On the
torch backend its data wait is torch's DataLoader's (Keras feeds arrays and torch data sets
through one); the train step's own work besides the model's call and the backward (the loss,
the metrics) is ``forward``, its optimizer's ``apply`` ``optimizer``. On TensorFlow (and JAX)
the step is one call of the compiled ``train_function``, which takes the batch from its
tf.data pipeline inside the graph: ``train_step`` (``Phase.TRAIN_STEP``), with the samples of
``fit``'s ``batch_size``. On every backend the callbacks given to ``fit`` that override a
batch or epoch hook are timed by name (``callbacks``; ``ModelCheckpoint`` and
``BackupAndRestore`` as ``checkpoint``); validation inside ``fit`` (``on_test_begin`` to
``on_test_end``) is ``evaluation``. The callback notes ``fit``'s settings; outside
``stepdoctor run`` it records a run of its own per ``fit`` and prints the diagnosis at its
end. Under ``stepdoctor run`` every ``fit`` gets one (``install``), which also notes the
``batch_size`` given to ``fit`` and hands it the callbacks to time.
"""

from __future__ import annotations

import functools
import inspect
import logging
import math
from collections.abc import Callable
from typing import Any

from stepdoctor.collect.hooks.batches import batch_size_of
from stepdoctor.collect.hooks.session import BaseSession
from stepdoctor.errors import UsageError
from stepdoctor.integrations._timing import (
    FrameworkTimer,
    FusedWaits,
    OwnSession,
    Setting,
    framework_loop,
    guarded,
    note_settings,
    patch_class,
    time_method,
)
from stepdoctor.model import (
    GENERATOR_MADE,
    GENERATOR_WAIT,
    PIPELINE_WAIT,
    PRODUCER_PHASE,
    PYDATASET_MADE,
    LayerInfo,
    ModelInfo,
    Phase,
)

try:
    import keras
except ImportError as exc:  # pragma: no cover - depends on what is installed
    raise UsageError("the Keras integration needs keras: pip install stepdoctor[keras]") from exc

__all__ = ["StepdoctorCallback", "data_kind", "describe_model", "install"]

logger = logging.getLogger(__name__)

_EVALUATION = Phase.EVALUATION.value
_OPTIMIZER = Phase.OPTIMIZER.value
_FORWARD = Phase.FORWARD.value
_TRAIN_STEP = Phase.TRAIN_STEP.value
_CALLBACKS = Phase.CALLBACKS.value
_CHECKPOINT = Phase.CHECKPOINT.value
#: The hooks of a user's callback timed by name: those ``fit`` calls around its batches and
#: epochs (the article's "on_train_batch_end is slow compared to the batch update").
TIMED_HOOKS = ("on_train_batch_begin", "on_train_batch_end", "on_epoch_begin", "on_epoch_end")
#: Callbacks whose hooks save the model: their time is ``checkpoint``, not ``callbacks``.
_SAVERS = ("ModelCheckpoint", "BackupAndRestore")
#: ``fit``'s batch for arrays when none is given (Keras's documented default).
KERAS_DEFAULT_BATCH = 32


class StepdoctorCallback(keras.callbacks.Callback):  # type: ignore[misc]
    """Watch a Keras ``fit``: one step per batch, validation as ``evaluation``; a run of its
    own (with the diagnosis printed at the end of ``fit``) unless one is already running
    (``stepdoctor run``, ``watch()``).

    It overrides no ``*_batch_end`` method: one that did would switch off the asynchronous
    dispatch of batch-end callbacks Keras uses when none needs them (``CallbackList``).

    Args:
        **watch_options: for the run of its own (``stepdoctor.watch``'s: ``out_dir``,
            ``json_path``, ``report``...).
    """

    def __init__(
        self,
        *,
        fit_settings: dict[str, Setting] | None = None,
        callbacks: list[Any] | None = None,
        batch_size: int | None = None,
        **watch_options: Any,
    ):
        """``fit_settings``, ``callbacks`` (those given to ``fit``, timed by name) and
        ``batch_size`` (its samples per batch, for samples/s where torch's hooks do not count
        them) come from ``install``'s wrapper of ``fit``."""
        super().__init__()
        self._own = OwnSession(**watch_options)
        self._fit_settings = fit_settings or {}
        self._callbacks = list(callbacks or ())
        self._batch_size: int | None = None
        self._fit_batch = batch_size
        self.waits: FusedWaits | None = None
        """Set by ``install`` where ``fit`` was given a generator on a compiled backend, or a
        tf.data pipeline on TensorFlow (with ``arrivals``)."""
        self.arrivals: Any = None
        """``_tfdata.Arrivals`` of the tf.data pipeline given to ``fit``: its batches'
        arrivals."""
        self._timer: FrameworkTimer | None = None
        self._began = False
        self._evaluating = False
        self._undo: list[Callable[[], None]] = []

    @guarded
    def on_train_begin(self, logs: Any = None) -> None:
        """Join (or start) the session and note ``fit``'s settings."""
        session = self._own.open()
        timer = self._timer = FrameworkTimer(session)
        self._began = False
        model = self.model
        params = dict(getattr(self, "params", None) or {})
        settings: dict[str, Setting] = {
            "backend": keras.backend.backend(),
            "epochs": params.get("epochs"),
            "steps_per_epoch": params.get("steps"),
            "verbose": params.get("verbose"),
            "steps_per_execution": getattr(model, "steps_per_execution", None),
            "jit_compile": _setting(getattr(model, "jit_compile", None)),
            "run_eagerly": _setting(getattr(model, "run_eagerly", None)),
            "floatx": keras.config.floatx(),
            "dtype_policy": _setting(getattr(keras.config.dtype_policy(), "name", None)),
            **self._fit_settings,
        }
        if keras.backend.backend() == "tensorflow":
            import tensorflow as tf

            from stepdoctor.integrations._tfsetup import tensorflow_settings

            settings.update({f"tensorflow_{k}": v for k, v in tensorflow_settings(tf).items()})
        note_settings(session, "keras", keras.__version__, settings)
        # the parameters' update (Keras's optimizer: torch's hooks do not see it), and the
        # train step's own work besides the model's call and the backward (the loss, the
        # metrics' update, zero_grad), which a plain loop's code would do: looked up at each
        # call (fit's train function calls self.train_step)
        if keras.backend.backend() == "torch":
            for owner, name, phase in (
                (getattr(model, "optimizer", None), "apply", _OPTIMIZER),
                (model, "train_step", _FORWARD),
            ):
                undo = None if owner is None else time_method(owner, name, timer, phase)
                if undo is not None:
                    self._undo.append(undo)
        else:
            # the compiled step (made before on_train_begin): fetch, forward, backward and
            # update in one call; samples from fit's batch (torch's hooks count none here)
            per_call = getattr(model, "steps_per_execution", 1)
            per_call = per_call if isinstance(per_call, int) and per_call > 1 else 1
            self._batch_size = None if self._fit_batch is None else self._fit_batch * per_call
            waits = self.waits
            if waits is not None:
                waits.per_call = per_call
                name = GENERATOR_WAIT if self.arrivals is None else PIPELINE_WAIT
                waits.on_wait = lambda ns: timer.hook(name, PRODUCER_PHASE, ns)
                waits.skip_first = _traces_first(model)
            if self.arrivals is not None:
                # batches fit took before training (a distribution strategy builds the
                # model from one): no step's
                self.arrivals.drain(timer.clock)
            # torch's hooks see no model here: described from Keras's own layers
            described = describe_model(model)
            if described is not None:
                session.framework_models.append(described)
            undo = time_method(
                model,
                "train_function",
                timer,
                _TRAIN_STEP,
                own=True,
                on_call=None if waits is None else waits.call_begins,
                on_raise=None if waits is None else waits.call_failed,
            )
            if undo is not None:
                self._undo.append(undo)
        for callback in self._callbacks:
            self._undo.extend(_time_hooks(callback, timer))

    @guarded
    def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
        """A batch begins: the step of the one before ends here (its callbacks and the
        fetch of this batch included)."""
        if self._began and self._timer is not None:
            self._timer.step(self._batch_size)
        self._began = True

    @guarded
    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        """The epoch's last step ends (its validation included); the pipeline's stamps of its
        batches are read."""
        self._end_step()
        self._read_arrivals()

    @guarded
    def on_test_begin(self, logs: Any = None) -> None:
        """Validation inside ``fit`` begins (``evaluate`` called alone has no step)."""
        if self._timer is not None and not self._evaluating:
            self._evaluating = True
            self._timer.enter(_EVALUATION)

    @guarded
    def on_test_end(self, logs: Any = None) -> None:
        """Validation ends."""
        if self._timer is not None and self._evaluating:
            self._evaluating = False
            self._timer.leave()

    @guarded
    def on_train_end(self, logs: Any = None) -> None:
        """End the run of its own (its report printed)."""
        self._end_step()
        self._read_arrivals()
        self.cleanup()
        self._own.close()

    def produced(
        self, began_ns: int, ended_ns: int, batch: Any, *, py_dataset: bool = False
    ) -> None:
        """A ``batch`` of the generator (or ``py_dataset``: the ``PyDataset``) given to ``fit``
        was made from ``began_ns`` to ``ended_ns`` (on the thread tf.data runs it on). The
        making of batches before the training began (Keras reads the first to learn their
        shapes) is not counted, but they give the samples in a batch and, a generator's (its
        first is yielded again), take their place in the order of the waits; a PyDataset's are
        read for their shapes alone."""
        if self._fit_batch is None:
            self._fit_batch = batch_size_of(batch)
        timer = self._timer
        if self.waits is not None and (timer is not None or not py_dataset):
            self.waits.made(ended_ns)
        if timer is not None:
            name = PYDATASET_MADE if py_dataset else GENERATOR_MADE
            timer.hook(name, PRODUCER_PHASE, ended_ns - began_ns)

    def add_undo(self, undo: Callable[[], None]) -> None:
        """Run ``undo`` at ``cleanup`` (the end of ``fit``)."""
        self._undo.append(undo)

    def cleanup(self) -> None:
        """Put the model and its optimizer back as they were, and leave an evaluation left
        open (``fit`` ended by an exception calls no callback)."""
        if self._evaluating and self._timer is not None:
            self._evaluating = False
            self._timer.leave()
        while self._undo:
            self._undo.pop()()
        self._timer = None

    def _read_arrivals(self) -> None:
        """The tf.data pipeline's stamps since the last read, each the end of a batch's
        making as the steps met it (off the steps: at an epoch's end)."""
        if self.arrivals is not None and self.waits is not None and self._timer is not None:
            for stamp in self.arrivals.drain(self._timer.clock):
                self.waits.made(stamp)

    def _end_step(self) -> None:
        if self._began and self._timer is not None:
            self._timer.step(self._batch_size)
        self._began = False


def _in_framework_loop(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def looped(*args: Any, **kwargs: Any) -> Any:
        with framework_loop():
            return method(*args, **kwargs)

    return looped


def _traces_first(model: Any) -> bool:
    """Whether the compiled train function's first call will trace it (not yet traced: a
    first ``fit``); True where TensorFlow does not say."""
    count = getattr(getattr(model, "train_function", None), "experimental_get_tracing_count", None)
    try:
        return count is None or int(count()) == 0
    except Exception:
        return True


#: Keras layer classes by the kind the model rules judge (``LayerInfo.kind``).
_LAYER_KINDS = {
    "Dense": "linear",
    "EinsumDense": "linear",
    "Conv1D": "conv",
    "Conv2D": "conv",
    "Conv3D": "conv",
    "DepthwiseConv2D": "conv",
    "SeparableConv2D": "conv",
    "LSTM": "lstm",
    "GRU": "gru",
    "SimpleRNN": "rnn",
    "Embedding": "embedding",
}


def describe_model(model: Any) -> ModelInfo | None:
    """``model`` as the model rules read one: its weights' count, bytes and dtypes, and its
    dense, convolutional, recurrent and embedding layers' sizes (None where Keras could not
    say, as for a model not built yet)."""
    try:
        weights = list(model.weights)
        dtypes = sorted({keras.backend.standardize_dtype(w.dtype) for w in weights})
        count = sum(math.prod(w.shape) for w in weights)
        size = sum(
            math.prod(w.shape) * _itemsize(keras.backend.standardize_dtype(w.dtype))
            for w in weights
        )
        layers: list[LayerInfo] = []
        kinds: dict[str, int] = {}
        for layer in _leaf_layers(model):
            kind = _LAYER_KINDS.get(type(layer).__name__, "other")
            kinds[kind] = kinds.get(kind, 0) + 1
            if kind != "other":
                layers.append(_layer_info(layer, kind))
    except Exception:  # a model Keras cannot describe yet: the rules go without it
        return None
    return ModelInfo(
        model_id=id(model),
        class_name=type(model).__name__,
        param_count=int(count),
        param_bytes=int(size),
        param_dtypes=tuple(dtypes),
        module_count=sum(kinds.values()),
        layers=tuple(layers),
        kinds=kinds,
        training=True,
    )


def _leaf_layers(layer: Any) -> list[Any]:
    inner = list(getattr(layer, "layers", None) or [])
    if not inner:
        return [layer]
    return [leaf for child in inner for leaf in _leaf_layers(child)]


def _itemsize(dtype: str) -> int:
    digits = "".join(ch for ch in dtype if ch.isdigit())
    return max(1, int(digits) // 8) if digits else 4


def _layer_info(layer: Any, kind: str) -> LayerInfo:
    """A dense, convolutional, recurrent or embedding layer's sizes, in ``LayerInfo``'s
    terms (its input and output widths, its kernel)."""
    kernel = getattr(layer, "kernel", None)
    shape = tuple(int(d) for d in kernel.shape) if kernel is not None else ()
    if kind == "embedding":
        table = tuple(int(d) for d in layer.embeddings.shape)
        return LayerInfo(
            name=layer.name, kind=kind, params=int(layer.count_params()),
            in_features=table[1], out_features=table[0],
        )  # fmt: skip
    if kind == "conv":
        return LayerInfo(
            name=layer.name, kind=kind, params=int(layer.count_params()),
            in_features=shape[-2] if len(shape) >= 2 else None,
            out_features=int(layer.filters), kernel=tuple(layer.kernel_size),
        )  # fmt: skip
    if kind in ("lstm", "gru", "rnn"):
        cell = getattr(layer, "cell", layer)
        inner = getattr(cell, "kernel", None)
        return LayerInfo(
            name=layer.name, kind=kind, params=int(layer.count_params()),
            in_features=int(inner.shape[0]) if inner is not None else None,
            out_features=int(layer.units), batch_first=True,
        )  # fmt: skip
    return LayerInfo(
        name=layer.name, kind=kind, params=int(layer.count_params()),
        in_features=shape[0] if shape else None, out_features=shape[-1] if shape else None,
    )  # fmt: skip


def _time_hooks(callback: Any, timer: FrameworkTimer) -> list[Callable[[], None]]:
    """Time the ``TIMED_HOOKS`` ``callback``'s class overrides, by name (``Class.hook``);
    return their undos. A hook it inherits from ``keras.callbacks.Callback`` does nothing and
    is left alone (wrapping it would not change Keras's dispatch, but would time nothing)."""
    if isinstance(callback, StepdoctorCallback):
        return []
    kind = type(callback)
    phase = _CHECKPOINT if kind.__name__ in _SAVERS else _CALLBACKS
    undos = []
    for hook in TIMED_HOOKS:
        if getattr(kind, hook, None) is getattr(keras.callbacks.Callback, hook, None):
            continue
        undo = time_method(callback, hook, timer, phase, hook=f"{kind.__name__}.{hook}")
        if undo is not None:
            undos.append(undo)
    return undos


def _fit_batch(bound: inspect.BoundArguments, data: str) -> int | None:
    """The samples in a batch of ``fit``: its ``batch_size`` (Keras's default for arrays when
    none is given), or a tf.data pipeline's static batch dimension; None where unknown."""
    size = bound.arguments.get("batch_size")
    if isinstance(size, int) and size > 0:
        return size
    if data == "arrays":
        return KERAS_DEFAULT_BATCH
    x = bound.arguments.get("x")
    spec = getattr(x, "element_spec", None)
    first = spec[0] if isinstance(spec, tuple) and spec else spec
    shape = getattr(first, "shape", None)
    try:
        dim = shape[0] if shape is not None and len(shape) else None
    except TypeError:
        dim = None
    if isinstance(dim, int) and dim > 0:
        return dim
    if data == "tf.data" and keras.backend.backend() == "tensorflow":
        # a batch stage that keeps the last partial batch leaves the dimension unknown
        from stepdoctor.integrations import _tfdata

        return _tfdata.batch_size(x)
    return None


def _timed_generator(batches: Any, ours: StepdoctorCallback, clock: Callable[[], int]) -> Any:
    """A generator yielding ``batches``' batches, each one's making timed for ``ours``: still a
    generator, so Keras reads it as the one it was given."""
    while True:
        began = clock()
        try:
            batch = next(batches)
        except StopIteration:
            return
        ours.produced(began, clock(), batch)
        yield batch


def _watch_pipeline(
    model: Any,
    bound: inspect.BoundArguments,
    ours: StepdoctorCallback,
    settings: dict[str, Setting],
) -> None:
    """The tf.data pipeline given to ``fit``: described in ``settings``, and, where each call
    of the compiled step takes one batch, stamped as each batch leaves it (a step that takes
    several, ``steps_per_execution``, computes between its fetches: their waits are not told
    apart from its compute)."""
    import tensorflow as tf

    from stepdoctor.integrations import _tfdata

    x = bound.arguments["x"]
    if not isinstance(x, tf.data.Dataset):  # a distributed dataset: its own iterators
        return
    try:
        settings.update(_tfdata.describe(x))
        if getattr(model, "steps_per_execution", 1) != 1 or not _tfdata.can_stamp(x):
            return
        arrivals = _tfdata.Arrivals()
        stamped = arrivals.stamped(x)
    except Exception as exc:  # a pipeline we cannot read or extend: fit gets it as it was
        logger.debug("stepdoctor: the tf.data pipeline given to fit is not stamped: %r", exc)
        return
    bound.arguments["x"] = stamped
    ours.waits, ours.arrivals = FusedWaits(), arrivals


def _time_py_dataset(
    data: Any, ours: StepdoctorCallback, clock: Callable[[], int], settings: dict[str, Setting]
) -> None:
    """The ``PyDataset`` given to ``fit`` on TensorFlow or JAX: each batch its
    ``__getitem__`` makes timed (on tf.data's thread, in the order the steps take them),
    where Keras calls it from one thread (``workers`` 1, no multiprocessing: with more,
    Keras's enqueuer makes them out of order, or in other processes, and their waits are not
    measured). Its class's ``__getitem__`` is wrapped for this ``fit`` (``x[i]`` looks the
    method up on the class), timing this object's calls alone."""
    workers = getattr(data, "workers", 1)
    processes = bool(getattr(data, "use_multiprocessing", False))
    settings.update({"py_dataset_workers": workers, "py_dataset_multiprocessing": processes})
    if not isinstance(workers, int) or workers > 1 or processes:
        return
    kind = type(data)
    original = kind.__getitem__

    @functools.wraps(original)
    def timed(self: Any, index: Any) -> Any:
        if self is not data:
            return original(self, index)
        began = clock()
        batch = original(self, index)
        ours.produced(began, clock(), batch, py_dataset=True)
        return batch

    ours.add_undo(patch_class(kind, "__getitem__", timed))
    ours.waits = FusedWaits()


def _has_ours(callbacks: object) -> bool:
    listed = getattr(callbacks, "callbacks", callbacks)  # a CallbackList's own list
    if isinstance(listed, list | tuple):
        return any(isinstance(c, StepdoctorCallback) for c in listed)
    return isinstance(listed, StepdoctorCallback)


def _setting(value: object) -> Setting:
    return value if value is None or isinstance(value, str | int | float | bool) else str(value)


def data_kind(x: Any) -> str:
    """What ``fit`` was given to train on, in the words the fixes use: ``arrays`` (NumPy
    arrays or tensors, which Keras slices into batches itself), ``tf.data``, ``PyDataset``,
    ``DataLoader`` (a torch DataLoader: the job's own), ``generator``, or the type's name."""
    kind = type(x)
    names = {c.__name__ for c in kind.__mro__}
    module = kind.__module__ or ""
    if "PyDataset" in names:  # keras.utils.Sequence is its old name
        return "PyDataset"
    if "DataLoader" in names:
        return "DataLoader"
    if module.startswith("tensorflow") and "Dataset" in kind.__name__:
        return "tf.data"
    if inspect.isgenerator(x):
        return "generator"
    if hasattr(x, "shape") or isinstance(x, dict | list | tuple):
        return "arrays"
    return kind.__name__


def install(session: BaseSession) -> Callable[[], None]:
    """Give every ``fit`` from now on a ``StepdoctorCallback`` (which joins the running
    session) that also notes the ``batch_size`` given to ``fit``; return the undo."""
    model_cls = keras.Model
    original_fit = model_cls.fit

    signature = inspect.signature(original_fit)

    @functools.wraps(original_fit)
    def fit(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError:  # Keras will say what is wrong with the call
            return original_fit(self, *args, **kwargs)
        given = bound.arguments.get("callbacks")
        ours = None
        if not _has_ours(given):
            data = data_kind(bound.arguments.get("x"))
            settings: dict[str, Setting] = {"data": data}
            for name in ("batch_size", "validation_freq"):
                if bound.arguments.get(name) is not None:
                    settings[name] = _setting(bound.arguments[name])
            listed = getattr(given, "callbacks", given)  # a CallbackList's own list
            ours = StepdoctorCallback(
                fit_settings=settings,
                callbacks=list(listed)
                if isinstance(listed, list | tuple)
                else [listed]
                if listed is not None
                else [],
                batch_size=_fit_batch(bound, data),
            )
            if data == "generator" and keras.backend.backend() != "torch":
                # tf.data runs it on a thread of its own, inside the compiled step's fetch:
                # how long each batch takes to make is what tells the step waits on it
                ours.waits = FusedWaits()
                bound.arguments["x"] = _timed_generator(bound.arguments["x"], ours, session.clock)
            elif data == "tf.data" and keras.backend.backend() == "tensorflow":
                _watch_pipeline(self, bound, ours, settings)
            elif data == "PyDataset" and keras.backend.backend() != "torch":
                _time_py_dataset(bound.arguments["x"], ours, session.clock, settings)
            if isinstance(given, keras.callbacks.CallbackList):
                given.callbacks.append(ours)  # the user's list, with its own choices
                if getattr(given, "_model", None) is not None:
                    ours.set_model(given._model)
                ours.set_params(getattr(given, "params", None) or {})
            elif isinstance(given, list | tuple):
                bound.arguments["callbacks"] = [*given, ours]
            else:  # none, or a single callback
                bound.arguments["callbacks"] = [*([given] if given else []), ours]
        try:
            with framework_loop():
                return original_fit(*bound.args, **bound.kwargs)
        finally:
            if ours is not None:
                ours.cleanup()  # fit that raised called no on_train_end

    # evaluate and predict are Keras's own loops too: the hooks of hand-written TensorFlow
    # loops stay out of them
    undos = [patch_class(model_cls, "fit", fit)] + [
        patch_class(model_cls, name, _in_framework_loop(getattr(model_cls, name)))
        for name in ("evaluate", "predict")
    ]

    def uninstall() -> None:
        while undos:
            undos.pop()()

    return uninstall
