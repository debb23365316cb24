"""Zero-code instrumentation of PyTorch (hot path: see docs/design/hot-path.md).

``TorchPatches(sink).install()`` wraps, for as long as it is installed:

- ``_BaseDataLoaderIter.__next__``: the ``data_wait`` phase, and the batch size of each batch;
- ``DataLoader.__iter__``: the loader's configuration, once per loader;
- ``nn.Module.__call__``: the outermost model call per thread is the ``forward`` phase; after
  ``NARROW_AFTER_CALLS`` outermost calls only the classes seen outermost stay patched;
- ``torch.autograd.backward`` (``Tensor.backward`` calls it): the ``backward`` phase;
- every optimizer's ``step`` through torch's global step hooks: the ``optimizer`` phase;
- ``torch.save``, and the calls that put a saved file on storage (``STORAGE_CALLS``:
  ``os.fsync``, ``os.fdatasync``, ``shutil.copyfile`` under ``shutil.copy``/``move``): the
  ``checkpoint`` phase.

``uninstall()`` puts every original back. Torch is imported here, never by the core.

The hooks are the C ones of ``_hotpath`` when that module was built (``native_hooks()``), else
the Python functions below, which stay the reference: both append the same events.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from stepdoctor.collect.hooks.batches import batch_size_of, loader_info, note_workers
from stepdoctor.collect.hooks.events import (
    ENTER,
    EXIT,
    FWD_ENTER,
    FWD_EXIT,
    OPT_END,
    RESET,
    Event,
    EventBuffer,
    native_hooks,
)
from stepdoctor.model import EnvFact, LoaderInfo, ModelInfo, Phase
from stepdoctor.native import PURE_PYTHON_ENV, wanted

if TYPE_CHECKING:
    import collections

    from stepdoctor.collect.hooks.profiling import TraceCapture
    from stepdoctor.collect.hooks.trigger import ExperimentTrigger, StepLimit

__all__ = ["PURE_PYTHON_ENV", "STORAGE_CALLS", "TorchPatches", "TorchSink", "native_hooks"]


_DATA_WAIT = Phase.DATA_WAIT.value
_BACKWARD = Phase.BACKWARD.value
_OPTIMIZER = Phase.OPTIMIZER.value
_CHECKPOINT = Phase.CHECKPOINT.value
_SYNC = Phase.SYNC.value
_H2D = Phase.H2D.value
#: Tensor methods that copy a device tensor to the host and so wait for the device: inside a
#: step each one is a synchronisation (the ``sync`` phase). Patched only on GPU/MPS machines.
SYNC_METHODS = ("item", "tolist", "cpu")
#: Calls that put a saved file on storage: flushing it to disk (``torch.save`` returns once
#: the bytes are in the page cache; the fsync after it is where a slow disk makes the job
#: wait) and copying it elsewhere. A training loop makes them to save its state, so their time
#: is the ``checkpoint`` phase with ``torch.save``'s.
STORAGE_CALLS = (("os", "fsync"), ("os", "fdatasync"), ("shutil", "copyfile"))
#: The start of the warning torch's MPS backend gives for an op it runs on the CPU instead
#: (with PYTORCH_ENABLE_MPS_FALLBACK=1), from aten/src/ATen/mps/MPSFallback.mm.
MPS_FALLBACK_WARNING = "The operator '"
MPS_FALLBACK_MARK = "fall back to run on the CPU"

#: Outermost module calls after which the ``Module.__call__`` patch is narrowed to the classes
#: seen so far (``TorchPatches.narrow``): 64 calls are 32 steps of model + loss, past the
#: warm-up steps the rules leave out anyway, and every inner layer then runs unpatched (the
#: pass-through wrapper cost ~0.6 us per layer call, docs/overhead.md).
NARROW_AFTER_CALLS = 64

#: Batches whose dtypes are looked at (the first few are enough: a loader yields one dtype).
DTYPE_CHECKS = 4
#: A DistributedDataParallel model on the CPU times every iteration (DDP's default: its first
#: ten, then one in a hundred; its timer is a clock read there, per iteration).
DDP_SAMPLE_EVERY = 1

logger = logging.getLogger(__name__)


class TorchSink(Protocol):
    """Where the patches put what they see (a ``Session``)."""

    events: EventBuffer
    clock: Callable[[], int]
    models: dict[int, Any]
    """``id(model) -> model`` until the monitor inspected it, then ``None``."""
    ddp_models: list[Any]
    """DistributedDataParallel models the monitor saw, kept for their timings at the end."""
    loaders: dict[int, LoaderInfo]
    loader_workers: list[tuple[int, int]]
    """``(pid, id(loader))`` of each DataLoader worker process started, in order."""
    batch_dtypes: list[str]
    fallback_ops: list[str]
    """Ops the MPS backend ran on the CPU (from its fallback warnings)."""
    h2d_in_forward: list[int]
    """``[n]``: host-to-device copies made inside the model's forward."""
    h2d_copies: list[int]
    """``[pageable, pinned]``: host-to-device copies of tensors in pageable and in pinned
    host memory (a pageable copy is staged through a pinned buffer and blocks the host)."""
    sync_calls: list[int]
    """``[n]``: device-to-host reads (``.item()``, ``.tolist()``, ``.cpu()``) of device tensors."""
    experiment_trigger: ExperimentTrigger | None
    """Runs ``--experiments`` once after warm-up (None: no experiments)."""
    step_limit: StepLimit | None
    """Ends a tuning run after its steps (None: no limit)."""
    trace_capture: TraceCapture | None
    """A scheduled torch.profiler capture stepped by the optimizer (``run --trace``)."""
    model_inputs: dict[int, tuple[tuple[int, ...], str | None]]
    """``id(model) -> (shape, dtype)`` of the first tensor of its first call."""
    model_precision: dict[int, tuple[str | None, str | None]]
    """``id(model) -> (autocast, float32 matmul precision)`` at its first call
    (``precision_now``)."""
    framework_facts: list[EnvFact]
    """A training framework's name, version and settings, noted by its integration."""
    framework_models: list[ModelInfo]
    """Models a framework's integration described itself (Keras on TensorFlow or JAX)."""
    hook_calls: collections.deque[tuple[str, str, int]]
    """``(hook name, phase, duration_ns)`` of each framework hook call its integration timed,
    taken off by the monitor."""


def _sample_ddp_often(module: Any) -> None:
    """Have a DistributedDataParallel model on the CPU time every iteration
    (``DDP_SAMPLE_EVERY``), in the job's thread at its first call: DDP's own timings of a run
    (``probes/ddp.py``) are then an average over its iterations, not over its first ten (its
    warm-up) and one in a hundred. On a GPU DDP's timer waits for CUDA events at each timed
    iteration, so there its default stays."""
    setter = getattr(module, "_set_ddp_runtime_logging_sample_rate", None)
    if setter is None:
        return
    try:
        if all(p.device.type == "cpu" for p in module.parameters()):
            setter(DDP_SAMPLE_EVERY)
    except Exception as exc:  # a private API of torch: never break the job over it
        logger.debug("stepdoctor: DDP's sample rate left as it was: %r", exc)


def _input_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[int, ...], str | None]:
    """Shape and dtype of the first tensor a model was called with (once per model)."""
    for value in (*args, *kwargs.values()):
        shape = getattr(value, "shape", None)
        if shape is None:
            continue
        try:
            dims = tuple(int(d) for d in shape)
        except (TypeError, ValueError):  # symbolic: a Keras tensor's (None, 256), say
            return (), None
        return dims, str(getattr(value, "dtype", "")) or None
    return (), None


def precision_now(torch: Any, module: Any) -> tuple[str | None, str | None]:
    """The autocast dtype in force for ``module``'s device (``off``: none; None: unknown) and
    torch's float32 matmul precision, as the job runs its first call."""
    autocast: str | None = None
    try:
        param = next(module.parameters(), None)
        device = param.device.type if param is not None else "cpu"
        if device in ("cuda", "cpu", "xpu", "mps"):
            on = torch.is_autocast_enabled(device)
            autocast = str(torch.get_autocast_dtype(device)) if on else "off"
    except Exception:  # an older torch, or a module without parameters() of its own
        autocast = None
    try:
        matmul: str | None = str(torch.get_float32_matmul_precision())
    except Exception:
        matmul = None
    return autocast, matmul


def _dtypes_of(batch: object) -> list[str]:
    if isinstance(batch, dict):
        items: list[object] = list(batch.values())
    elif isinstance(batch, (list, tuple)):
        items = list(batch)
    else:
        items = [batch]
    return [str(t.dtype) for t in items if hasattr(t, "dtype")]


class TorchPatches:
    """The set of torch patches feeding one sink. Install at most once at a time."""

    def __init__(self, sink: TorchSink, *, native: bool | None = None) -> None:
        """``native``: use the C hooks (True: they must be built), the Python ones (False) or
        the C ones when built (None)."""
        self._sink = sink
        self._c = wanted(native_hooks, native, "hook module (collect/hooks/_hotpath)")
        self._undo: list[Callable[[], None]] = []
        self._in_forward: set[int] = set()
        """Threads inside an outermost model call."""
        self._outer_classes: set[type] = set()
        """Module classes seen as an outermost call (kept patched by ``narrow``)."""
        self._wrappers: set[Any] = set()
        self._generic_call: Any = None
        self._module_call: Any = None
        """``nn.Module.__call__`` as it was before ``install``."""

    @property
    def installed(self) -> bool:
        """Whether the patches are in place."""
        return bool(self._undo)

    def install(self, *, accelerator: bool | None = None) -> None:
        """Install every patch (torch must be importable).

        Args:
            accelerator: also time device-to-host synchronisations and catch MPS fallback
                warnings (default: when CUDA or MPS is available; a CPU job pays nothing).
        """
        if self._undo:
            return
        import torch
        import torch.optim.optimizer as optim_mod
        from torch.utils.data import dataloader as dl

        sink = self._sink
        append = sink.events.append
        clock = sink.clock
        get_ident = threading.get_ident

        self._patch(dl._BaseDataLoaderIter, "__next__", self._wrap_next(append, clock))
        self._patch(dl.DataLoader, "__iter__", self._wrap_iter(dl.DataLoader.__iter__))
        self._module_call = torch.nn.Module.__call__
        self._patch(torch.nn.Module, "__call__", self._wrap_call(self._module_call, discover=True))
        phase_wrapper = _phase_wrapper if self._c is None else self._c.phase
        backward = _dressed(
            phase_wrapper(torch.autograd.backward, _BACKWARD, append, clock),
            torch.autograd.backward,
        )
        self._patch(torch.autograd, "backward", backward)
        self._patch(
            torch,
            "save",
            _dressed(phase_wrapper(torch.save, _CHECKPOINT, append, clock), torch.save),
        )
        for module_name, name in STORAGE_CALLS:
            owner = importlib.import_module(module_name)
            original = getattr(owner, name, None)
            if original is not None:  # os.fdatasync: not on macOS
                timed = phase_wrapper(original, _CHECKPOINT, append, clock)
                self._patch(owner, name, _dressed(timed, original))
        if accelerator is None:
            mps = getattr(torch.backends, "mps", None)
            accelerator = bool(torch.cuda.is_available()) or bool(
                mps is not None and mps.is_available()
            )
        if accelerator:
            for name in SYNC_METHODS:
                original = getattr(torch.Tensor, name)
                timed = phase_wrapper(original, _SYNC, append, clock)
                self._patch(torch.Tensor, name, _sync_wrapper(original, timed, sink.sync_calls))
            for name in ("to", "cuda"):
                original = getattr(torch.Tensor, name)
                timed = phase_wrapper(original, _H2D, append, clock)
                self._patch(torch.Tensor, name, self._h2d_wrapper(torch, original, timed, name))
            self._catch_fallback_warnings()

        def pre_hook(optimizer: object, args: object, kwargs: object) -> None:
            append((clock(), ENTER, _OPTIMIZER, get_ident()))

        trigger = sink.experiment_trigger
        limit = sink.step_limit
        capture = sink.trace_capture
        if self._c is not None:
            pre_hook = self._c.mark(ENTER, _OPTIMIZER, append, clock)

        def post_hook(optimizer: object, args: object, kwargs: object) -> None:
            append((clock(), OPT_END, id(optimizer), get_ident()))
            if trigger is not None and trigger.due(optimizer):
                trigger.run()
                append((clock(), RESET, None, get_ident()))
            if capture is not None and capture.step(optimizer):
                append((clock(), RESET, None, get_ident()))  # the profiler's time, not the job's
            if limit is not None:
                limit.check(optimizer)

        if self._c is not None and trigger is None and capture is None and limit is None:
            post_hook = self._c.mark_id(OPT_END, append, clock)
        pre = optim_mod.register_optimizer_step_pre_hook(pre_hook)
        post = optim_mod.register_optimizer_step_post_hook(post_hook)
        self._undo.append(pre.remove)
        self._undo.append(post.remove)

    def uninstall(self) -> None:
        """Put every original back, in reverse order."""
        while self._undo:
            self._undo.pop()()
        self._outer_classes.clear()
        self._wrappers.clear()
        self._generic_call = None

    def _h2d_wrapper(
        self, torch: Any, original: Callable[..., Any], timed: Callable[..., Any], name: str
    ) -> Any:
        """Time host-to-device copies as ``h2d`` (``timed``: ``original`` wrapped as that phase
        by the phase hook); count those made inside the model's forward (tensors created on the
        CPU and moved at every call), and those from pageable and from pinned memory."""
        sink = self._sink
        in_forward = self._in_forward
        get_ident = threading.get_ident
        device_type = torch.device

        def moves(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
            if name == "cuda":
                return True
            target = kwargs.get("device", args[0] if args else None)
            if isinstance(target, str):
                return not target.startswith("cpu")
            if isinstance(target, device_type):
                return bool(target.type != "cpu")
            device = getattr(target, "device", None)  # .to(other_tensor)
            return device is not None and bool(device.type != "cpu")

        copies = sink.h2d_copies

        def wrapper(tensor: Any, *args: Any, **kwargs: Any) -> Any:
            if tensor.device.type != "cpu" or not moves(args, kwargs):
                return original(tensor, *args, **kwargs)
            if get_ident() in in_forward:
                sink.h2d_in_forward[0] += 1
            try:  # noqa: SIM105 (contextlib.suppress costs a context manager per copy)
                copies[1 if tensor.is_pinned() else 0] += 1
            except Exception:  # a tensor type without pinning: counting must not break the copy
                pass
            return timed(tensor, *args, **kwargs)

        return _dressed(wrapper, original)

    def _catch_fallback_warnings(self) -> None:
        import warnings

        original = warnings.showwarning
        ops = self._sink.fallback_ops

        def showwarning(message: Any, category: Any, *args: Any, **kwargs: Any) -> None:
            text = str(message)
            if text.startswith(MPS_FALLBACK_WARNING) and MPS_FALLBACK_MARK in text:
                op = text[len(MPS_FALLBACK_WARNING) :].split("'", 1)[0]
                if op not in ops:
                    ops.append(op)
            original(message, category, *args, **kwargs)

        self._patch(warnings, "showwarning", showwarning)

    def _patch(self, owner: Any, name: str, wrapper: Any) -> None:
        original = owner.__dict__[name] if name in vars(owner) else getattr(owner, name)
        setattr(owner, name, wrapper)
        self._undo.append(lambda: setattr(owner, name, original))

    def _wrap_next(self, append: Callable[[Event], None], clock: Callable[[], int]) -> Any:
        from torch.utils.data import dataloader as dl

        original = dl._BaseDataLoaderIter.__next__
        get_ident = threading.get_ident
        dtypes = self._sink.batch_dtypes
        checks = [DTYPE_CHECKS]

        trigger = self._sink.experiment_trigger
        capture = self._sink.trace_capture  # counts samples until the job's warm-up is over

        if self._c is not None:

            def after(it: Any, batch: Any) -> None:
                if checks[0]:
                    checks[0] -= 1
                    dtypes.extend(_dtypes_of(batch))
                if trigger is not None:
                    trigger.saw_batch(it, batch)
                if capture is not None and capture.waiting:
                    capture.saw_batch(batch)
                elif not checks[0] and trigger is None:
                    hook.after = None  # nothing left to do after a batch

            hook = self._c.next(original, _DATA_WAIT, append, clock, after)
            return _dressed(hook, original)

        def __next__(it: Any) -> Any:
            tid = get_ident()
            append((clock(), ENTER, _DATA_WAIT, tid))
            try:
                batch = original(it)
            except BaseException:
                append((clock(), EXIT, None, tid))
                raise
            append((clock(), EXIT, batch_size_of(batch), tid))
            if checks[0]:
                checks[0] -= 1
                dtypes.extend(_dtypes_of(batch))
            if trigger is not None:
                trigger.saw_batch(it, batch)
            if capture is not None and capture.waiting:
                capture.saw_batch(batch)
            return batch

        return __next__

    def _wrap_iter(self, original: Callable[[Any], Any]) -> Any:
        loaders = self._sink.loaders
        workers = self._sink.loader_workers

        trigger = self._sink.experiment_trigger

        def __iter__(loader: Any) -> Any:
            if id(loader) not in loaders:
                loaders[id(loader)] = loader_info(loader)
            it = original(loader)
            note_workers(it, loader, workers)
            if trigger is not None:
                trigger.saw_iterator(it, loader)
            return it

        return __iter__

    def narrow(self) -> None:
        """Take the ``Module.__call__`` patch off every module class but the ones seen as an
        outermost call so far (the model, the loss...): inner layers then run unpatched.

        Called by the patch itself after ``NARROW_AFTER_CALLS`` outermost calls. A module class
        first called as outermost after that is no longer timed as ``forward`` (its time lands
        in ``other``).
        """
        import torch

        generic = self._generic_call
        if generic is None or vars(torch.nn.Module)["__call__"] is not generic:
            return
        original = self._module_call
        for cls in list(self._outer_classes):
            resolved = _own_call(cls, self._wrappers)
            wrapper = self._wrap_call(original if resolved is None else resolved)
            self._patch_class(cls, wrapper)
        setattr(torch.nn.Module, "__call__", original)  # noqa: B010 (the generic undo stays)

    def _patch_class(self, cls: type, wrapper: Any) -> None:
        """Set ``cls.__call__``; on undo, put back its own or remove ours."""
        had = "__call__" in vars(cls)
        before = vars(cls).get("__call__")
        type.__setattr__(cls, "__call__", wrapper)

        def undo() -> None:
            if had:
                type.__setattr__(cls, "__call__", before)
            elif vars(cls).get("__call__") is wrapper:
                type.__delattr__(cls, "__call__")

        self._undo.append(undo)

    def _wrap_call(self, original: Callable[..., Any], *, discover: bool = False) -> Any:
        """The forward patch. ``discover``: the generic one on ``nn.Module``, which notes
        outermost classes and narrows itself after ``NARROW_AFTER_CALLS`` outermost calls."""
        sink = self._sink
        append = sink.events.append
        clock = sink.clock
        models = sink.models
        busy = self._in_forward
        get_ident = threading.get_ident
        inputs = sink.model_inputs
        precision = sink.model_precision
        trigger = sink.experiment_trigger
        classes = self._outer_classes
        outermost = [0]
        import torch

        grad_enabled = torch.is_grad_enabled

        def first_call(module: Any, *args: Any, **kwargs: Any) -> None:
            key = id(module)
            models[key] = module
            try:
                inputs[key] = _input_of(args, kwargs)
                precision[key] = precision_now(torch, module)
                _sample_ddp_often(module)
                if trigger is not None:
                    trigger.saw_model(module, args, kwargs)
            except Exception as exc:  # what we note of a model must never break its call
                logger.debug("stepdoctor: a model's first call not noted: %r", exc)

        def __call__(module: Any, *args: Any, **kwargs: Any) -> Any:
            tid = get_ident()
            if tid in busy:
                return original(module, *args, **kwargs)
            busy.add(tid)
            try:
                key = id(module)
                if key not in models:
                    first_call(module, *args, **kwargs)
                append((clock(), FWD_ENTER, key << 2 | grad_enabled() << 1 | module.training, tid))
                try:
                    return original(module, *args, **kwargs)
                finally:
                    append((clock(), FWD_EXIT, key, tid))
            finally:
                busy.discard(tid)

        if self._c is not None:
            __call__ = self._c.forward(
                original, append, clock, busy, models, first_call, grad_enabled
            )

        def discovering(module: Any, *args: Any, **kwargs: Any) -> Any:
            if get_ident() not in busy:
                classes.add(type(module))
                outermost[0] += 1
                if outermost[0] == NARROW_AFTER_CALLS:
                    self.narrow()
            return __call__(module, *args, **kwargs)

        wrapper = discovering if discover else __call__
        _dressed(wrapper, original)
        self._wrappers.add(wrapper)
        if discover:
            self._generic_call = wrapper
        return wrapper


def _own_call(cls: type, ours: set[Any]) -> Any:
    """The ``__call__`` a module class has of its own, below ``nn.Module`` (None: Module's),
    skipping stepdoctor's wrappers."""
    for klass in cls.__mro__:
        if klass.__module__ == "torch.nn.modules.module" and klass.__name__ == "Module":
            return None
        call = vars(klass).get("__call__")
        if call is not None and call not in ours:
            return call
    return None


def _sync_wrapper(
    original: Callable[..., Any], timed: Callable[..., Any], count: list[int]
) -> Callable[..., Any]:
    """Time ``tensor.item()``-like calls as ``sync`` (``timed``: ``original`` wrapped as that
    phase by the phase hook) and count them, when the tensor is on a device."""

    def wrapper(tensor: Any, *args: Any, **kwargs: Any) -> Any:
        if tensor.device.type == "cpu":
            return original(tensor, *args, **kwargs)
        count[0] += 1
        return timed(tensor, *args, **kwargs)

    return _dressed(wrapper, original)


def _phase_wrapper(
    original: Callable[..., Any],
    phase: str,
    append: Callable[[Event], None],
    clock: Callable[[], int],
) -> Callable[..., Any]:
    """Time each call of ``original`` as ``phase``: the Python twin of the C ``phase`` hook,
    behind backward, torch.save and the device reads and copies."""
    get_ident = threading.get_ident

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        tid = get_ident()
        append((clock(), ENTER, phase, tid))
        try:
            return original(*args, **kwargs)
        finally:
            append((clock(), EXIT, None, tid))

    return wrapper  # dressed by the caller, as the C hook is


def _dressed(wrapper: Callable[..., Any], original: Callable[..., Any]) -> Callable[..., Any]:
    """Give a patch the name, doc and ``__wrapped__`` of what it wraps."""
    wrapper.__wrapped__ = original  # type: ignore[attr-defined]
    wrapper.__name__ = getattr(original, "__name__", "wrapper")
    wrapper.__doc__ = original.__doc__
    return wrapper
