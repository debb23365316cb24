"""PyTorch Lightning (``lightning`` 2.x, and ``pytorch_lightning``): its actions as our phases.

::

    trainer = L.Trainer(callbacks=[StepdoctorCallback()])   # or: stepdoctor run train.py

``StepdoctorCallback`` puts a ``StepdoctorProfiler`` in front of the Trainer's profiler (the
user's own, if any, still gets every call: it is wrapped, not replaced) and maps Lightning's
profiled actions to phases: the training loop's batch fetch is ``data_wait``, the batch's
move to the device ``h2d``, ``training_step`` ``forward``, the backward pass
``backward`` (torch's own hook), ``optimizer_step``/``optimizer_zero_grad`` ``optimizer``, callback
and LightningModule hooks ``callbacks`` (each timed by name), the logger connector's
``log_metrics`` ``callbacks`` (``logging``), the validation loop ``evaluation`` and
``save_checkpoint`` ``checkpoint``. A step is an optimizer update (torch's optimizer hooks
end it; with ``accumulate_grad_batches`` its batches are micro-batches). Outside ``stepdoctor
run`` the callback records a run of its own per ``fit`` and prints its diagnosis at the end.

Under ``stepdoctor run`` every Trainer gets the callback (``install``), and the ranks that
Lightning's launcher starts as new processes (``strategy="ddp"`` on several devices) are
started under ``stepdoctor run`` too, each with a record in ``rank-N`` of the run's folder.
"""

from __future__ import annotations

import functools
import importlib
import math
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from stepdoctor.collect.hooks.session import BaseSession
from stepdoctor.errors import UsageError
from stepdoctor.integrations._timing import (
    FrameworkTimer,
    OwnSession,
    Setting,
    guarded,
    note_settings,
    setting_facts,
    time_method,
)
from stepdoctor.model import Phase
from stepdoctor.probes.ranks import LAUNCHED_JOB_VARIABLE, LAUNCHED_LOCAL_WORLD_VARIABLE

__all__ = [
    "install",
    "kit",
    "phase_of",
    "watched_command",
]

_CALLBACKS = Phase.CALLBACKS.value
_EVALUATION = Phase.EVALUATION.value
_CHECKPOINT = Phase.CHECKPOINT.value

#: Lightning's profiled actions (``[Owner]Class.hook``) and the phase each one's time is.
_STRATEGY_PHASES = {
    "batch_to_device": Phase.H2D.value,
    "training_step": Phase.FORWARD.value,
}  # the strategy's backward is torch's (timed by its own hook), with hooks around it
_MODULE_PHASES = {
    "optimizer_step": Phase.OPTIMIZER.value,
    "optimizer_zero_grad": Phase.OPTIMIZER.value,
}
_LOOP_PHASES = {
    "[_TrainingEpochLoop].train_dataloader_next": Phase.DATA_WAIT.value,
    "save_checkpoint": _CHECKPOINT,
}
#: LightningModule hooks that are part of another phase (the batch's move to the device, the
#: evaluation loop's switch of the model's mode), not callbacks of their own.
_MODULE_HOOKS_IN_PLACE = frozenset(
    {
        "on_before_batch_transfer",
        "on_after_batch_transfer",
        "transfer_batch_to_device",
        "on_validation_model_eval",
        "on_validation_model_train",
        "on_validation_model_zero_grad",
        "on_test_model_eval",
        "on_test_model_train",
    }
)
#: The evaluation loop: from the first of its start hooks to the strategy's end hook, which
#: Lightning calls last (``_EvaluationLoop._on_evaluation_end``: callbacks, module, strategy).
_EVAL_STARTS = frozenset({"on_validation_start", "on_test_start"})
_EVAL_ENDS = frozenset({"on_validation_end", "on_test_end"})


@functools.lru_cache(maxsize=4096)
def phase_of(action: str) -> tuple[str | None, str | None]:
    """``(phase entered, hook name timed)`` for one of Lightning's profiled actions: the
    phase is None where the action's time stays in the phase around it, the hook name None
    where it is not a hook of a callback or of the LightningModule."""
    if action in _LOOP_PHASES:
        return _LOOP_PHASES[action], None
    if not action.startswith("["):
        return None, None
    owner, _, rest = action[1:].partition("]")
    cls, _, hook = rest.rpartition(".")
    # a callback's state, as in ModelCheckpoint{'monitor': ...}; a class made in a function
    cls = cls.partition("{")[0].rpartition(".")[2]
    if cls == "StepdoctorCallback":  # our own
        return None, None
    if owner == "Strategy":
        return _STRATEGY_PHASES.get(hook), None
    if owner == "LightningModule":
        if hook in _MODULE_PHASES:
            return _MODULE_PHASES[hook], None
        if hook.startswith("on_") and hook not in _MODULE_HOOKS_IN_PLACE:
            return _CALLBACKS, f"{cls}.{hook}"
        return None, None
    if owner in ("Callback", "LightningDataModule"):
        return _CALLBACKS, f"{cls}.{hook}"
    return None, None


def kit(package: str = "") -> tuple[type, type]:
    """``(StepdoctorProfiler, StepdoctorCallback)`` for the Lightning package ``package``
    (``lightning`` or ``pytorch_lightning``; by default the first installed): each package
    has classes of its own, which its Trainer requires its callbacks and profilers to be."""
    return _kit(package or _installed())


def _installed() -> str:
    """The first Lightning package installed."""
    for name in ("lightning", "pytorch_lightning"):
        try:
            _package(name)
        except UsageError:
            continue
        return name
    raise UsageError("the Lightning integration needs lightning: pip install stepdoctor[lightning]")


@functools.cache
def _kit(package: str) -> tuple[type, type]:
    pl = _package(package)

    class StepdoctorProfiler(pl.profilers.Profiler):  # type: ignore[name-defined,misc]
        """A Lightning profiler that times the Trainer's actions into a stepdoctor session and
        passes every call on to ``wrapped`` (the Trainer's own profiler)."""

        def __init__(self, timer: FrameworkTimer, wrapped: Any = None) -> None:
            super().__init__()
            self.wrapped = wrapped if wrapped is not None else pl.profilers.PassThroughProfiler()
            self._timer = timer
            self._started: dict[str, int] = {}
            self._in_eval = False

        def start(self, action_name: str) -> None:
            """Lightning starts ``action_name``."""
            self.wrapped.start(action_name)
            phase, hook = phase_of(action_name)
            timer = self._timer
            if self._in_eval:
                if phase == _CHECKPOINT:
                    timer.enter(phase)
            elif action_name.rpartition(".")[2] in _EVAL_STARTS:
                self._in_eval = True
                timer.enter(_EVALUATION)
            elif phase is not None:
                timer.enter(phase)
            if hook is not None:
                self._started[action_name] = timer.clock()

        def stop(self, action_name: str) -> None:
            """Lightning ends ``action_name``."""
            self.wrapped.stop(action_name)
            timer = self._timer
            phase, hook = phase_of(action_name)
            if hook is not None:
                began = self._started.pop(action_name, None)
                if began is not None:
                    timer.hook(
                        hook, _EVALUATION if self._in_eval else phase or "", timer.clock() - began
                    )
            if self._in_eval:
                if phase == _CHECKPOINT:
                    timer.leave()
                elif action_name.startswith("[Strategy]") and (
                    action_name.rpartition(".")[2] in _EVAL_ENDS
                ):
                    self._in_eval = False
                    timer.leave()
            elif phase is not None:
                timer.leave()

        def close(self) -> None:
            """Leave an evaluation left open (validation that raised)."""
            if self._in_eval:
                self._in_eval = False
                self._timer.leave()

        def setup(
            self, stage: str, local_rank: int | None = None, log_dir: str | None = None
        ) -> None:
            """Set the wrapped profiler up as the Trainer would have."""
            self.wrapped._lightning_module = getattr(self, "_lightning_module", None)
            self.wrapped.setup(stage=stage, local_rank=local_rank, log_dir=log_dir)

        def summary(self) -> str:
            """The wrapped profiler's summary (this one keeps none: the report is stepdoctor's)."""
            return str(self.wrapped.summary())

        def describe(self) -> None:
            """Let the wrapped profiler write its report."""
            self.wrapped.describe()

        def teardown(self, stage: str | None) -> None:
            """Tear the wrapped profiler down."""
            self.wrapped.teardown(stage)

        def __getattr__(self, name: str) -> Any:
            # what the user asks of trainer.profiler (a PyTorchProfiler's attributes) is theirs
            if name == "wrapped":
                raise AttributeError(name)
            return getattr(self.wrapped, name)

        def __del__(self) -> None:
            # Profiler.__del__ tears down: ours is dropped when fit ends, before the Trainer
            # asks the wrapped one for its report (an AdvancedProfiler's would be emptied)
            pass

        def __reduce__(self) -> tuple[Any, ...]:
            # made inside kit(): pickled (ddp_spawn) as the wrapped profiler alone
            return (_identity, (self.wrapped,))

    class StepdoctorCallback(pl.Callback):  # type: ignore[name-defined,misc]
        """Watch a Lightning ``fit``: its actions as phases, its callbacks and logging timed by
        name, its settings noted; a run of its own (with the diagnosis printed at the end of
        ``fit``) unless one is already running (``stepdoctor run``, ``watch()``).

        Args:
            **watch_options: for the run of its own (``stepdoctor.watch``'s: ``out_dir``,
                ``json_path``, ``report``...).
        """

        def __init__(self, **watch_options: Any) -> None:
            self._options = watch_options
            self._own = OwnSession(**watch_options)
            self._timer: FrameworkTimer | None = None
            self._undo: list[Callable[[], None]] = []

        def __reduce__(self) -> tuple[Any, ...]:
            # made inside kit(): pickled by name (ddp_spawn sends the Trainer to its ranks)
            return (_callback, (package, self._options))

        @guarded
        def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
            """Join (or start) the session and put our profiler in front of the Trainer's."""
            if stage != "fit":
                return
            session = self._own.open()
            timer = self._timer = FrameworkTimer(session)
            if not isinstance(trainer.profiler, StepdoctorProfiler):
                trainer.profiler = StepdoctorProfiler(timer, wrapped=trainer.profiler)
            # the logger connector's write of every logged step to the loggers
            connector = getattr(trainer, "_logger_connector", None)
            undo = (
                None
                if connector is None
                else time_method(
                    connector, "log_metrics", timer, _CALLBACKS, "logging (log_metrics)"
                )
            )
            if undo is not None:
                self._undo.append(undo)
            trainer_cls = type(trainer)
            note_settings(
                session,
                "lightning",
                _version(pl),
                _settings(trainer) | {"package": trainer_cls.__module__.partition(".")[0]},
            )

        @guarded
        def on_train_start(self, trainer: Any, pl_module: Any) -> None:
            """Note what is known once the loop starts (batches per epoch, loader workers)."""
            session = self._own.session
            if session is None:
                return
            loaders = _train_loaders(trainer)
            late: dict[str, Setting] = {
                "num_training_batches": _number(getattr(trainer, "num_training_batches", None)),
                "val_check_batch": _number(getattr(trainer, "val_check_batch", None)),
            }
            if loaders:
                late["num_workers"] = min(int(getattr(dl, "num_workers", 0) or 0) for dl in loaders)
                late["batch_size"] = getattr(loaders[0], "batch_size", None)
            known = {key: value for key, value in late.items() if value is not None}
            session.framework_facts.extend(setting_facts("lightning", known))

        @guarded
        def teardown(self, trainer: Any, pl_module: Any, stage: str) -> None:
            """End the run of its own (its report printed) after ``fit``."""
            if stage == "fit":
                self._end(trainer, None)

        @guarded
        def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
            """``fit`` raised: the run of its own ends with the exception's status."""
            self._end(trainer, exception)

        def _end(self, trainer: Any, exc: BaseException | None) -> None:
            profiler = trainer.profiler
            if isinstance(profiler, StepdoctorProfiler):
                profiler.close()
                trainer.profiler = profiler.wrapped
            while self._undo:
                self._undo.pop()()
            self._timer = None
            self._own.close(exc)

    return StepdoctorProfiler, StepdoctorCallback


def _identity(value: Any) -> Any:
    return value


def _callback(package: str, options: dict[str, Any]) -> Any:
    """A ``StepdoctorCallback`` of ``package`` made again (after pickling)."""
    return kit(package)[1](**options)


def _package(name: str) -> Any:
    """The Lightning package's ``pytorch`` part: ``lightning.pytorch`` or
    ``pytorch_lightning``."""
    names = [name] if name else ["lightning", "pytorch_lightning"]
    for each in names:
        try:
            return importlib.import_module(
                "lightning.pytorch" if each == "lightning" else "pytorch_lightning"
            )
        except ImportError:
            continue
    raise UsageError("the Lightning integration needs lightning: pip install stepdoctor[lightning]")


def _version(pl: Any) -> str:
    return str(getattr(pl, "__version__", ""))


def __getattr__(name: str) -> Any:
    # StepdoctorCallback / StepdoctorProfiler: the first installed package's
    if name in ("StepdoctorProfiler", "StepdoctorCallback"):
        return kit()[name == "StepdoctorCallback"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _number(value: object) -> int | float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value if math.isfinite(value) else None


def _settings(trainer: Any) -> dict[str, Setting]:
    """The Trainer's settings the rules judge, in its own argument names."""
    found: dict[str, Setting] = {
        "log_every_n_steps": _number(getattr(trainer, "log_every_n_steps", None)),
        "val_check_interval": _number(getattr(trainer, "val_check_interval", None)),
        "check_val_every_n_epoch": _number(getattr(trainer, "check_val_every_n_epoch", None)),
        "limit_val_batches": _number(getattr(trainer, "limit_val_batches", None)),
        "accumulate_grad_batches": _number(getattr(trainer, "accumulate_grad_batches", None)),
        "precision": str(getattr(trainer, "precision", "")),
        "strategy": type(getattr(trainer, "strategy", None)).__name__,
        "world_size": _number(getattr(trainer, "world_size", None)),
        "loggers": ", ".join(type(lg).__name__ for lg in getattr(trainer, "loggers", ()) or ()),
    }
    for callback in getattr(trainer, "callbacks", ()) or ():
        if type(callback).__name__ == "ModelCheckpoint":
            found["checkpoint_every_n_train_steps"] = _number(
                getattr(callback, "_every_n_train_steps", None)
            )
            found["checkpoint_every_n_epochs"] = _number(getattr(callback, "_every_n_epochs", None))
    return found


def _train_loaders(trainer: Any) -> list[Any]:
    loaders = getattr(trainer, "train_dataloader", None)
    if loaders is None:
        return []
    if isinstance(loaders, dict):
        return list(loaders.values())
    if isinstance(loaders, list | tuple):
        return list(loaders)
    return [loaders]


def install(session: BaseSession, package: str = "lightning") -> Callable[[], None]:
    """Give every Trainer of ``package`` (``lightning`` or ``pytorch_lightning``) made from
    now on a ``StepdoctorCallback`` (which joins the running session), and start the ranks
    Lightning's launcher starts under ``stepdoctor run``, their records in ``session``'s
    folder; return the undo."""
    pl = _package(package)
    callback_cls = kit(package)[1]
    undo: list[Callable[[], None]] = []
    trainer_cls = pl.Trainer
    original_init = trainer_cls.__init__

    @functools.wraps(original_init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        if not any(isinstance(c, callback_cls) for c in self.callbacks):
            self.callbacks.append(callback_cls())

    def uninstall() -> None:
        while undo:
            undo.pop()()

    trainer_cls.__init__ = __init__
    undo.append(lambda: setattr(trainer_cls, "__init__", original_init))
    try:
        undo.append(_watch_launched_ranks(session, package))
    except Exception:  # a launcher of another version: undo what went in
        uninstall()
        raise
    return uninstall


def _watch_launched_ranks(session: BaseSession, package: str) -> Callable[[], None]:
    """Start the processes of Lightning's script launcher under ``stepdoctor run``."""
    try:
        launcher_mod = __import__(
            f"{package}.pytorch.strategies.launchers.subprocess_script"
            if package == "lightning"
            else f"{package}.strategies.launchers.subprocess_script",
            fromlist=["_basic_subprocess_cmd"],
        )
    except ImportError:
        return lambda: None
    if not hasattr(launcher_mod, "_basic_subprocess_cmd"):  # an older Lightning
        return lambda: None
    out_dir = getattr(session, "out_dir", None)
    original_cmd = getattr(launcher_mod, "_basic_subprocess_cmd")  # noqa: B009
    launcher_cls = launcher_mod._SubprocessScriptLauncher
    original_call = launcher_cls._call_children_scripts

    def _basic_subprocess_cmd() -> Sequence[str]:
        return watched_command(list(original_cmd()))

    def _call_children_scripts(self: Any) -> None:
        if out_dir is not None:
            os.environ[LAUNCHED_JOB_VARIABLE] = str(out_dir)
        os.environ[LAUNCHED_LOCAL_WORLD_VARIABLE] = str(self.num_processes)
        original_call(self)

    setattr(launcher_mod, "_basic_subprocess_cmd", _basic_subprocess_cmd)  # noqa: B010
    launcher_cls._call_children_scripts = _call_children_scripts

    def undo() -> None:
        setattr(launcher_mod, "_basic_subprocess_cmd", original_cmd)  # noqa: B010
        launcher_cls._call_children_scripts = original_call

    return undo


def watched_command(command: list[str]) -> list[str]:
    """Lightning's command for a rank (``python script.py args`` or ``python -m module
    args``) as the same run under ``stepdoctor run``."""
    if len(command) < 2:
        return command
    return [command[0] or sys.executable, "-m", "stepdoctor", "run", "--no-report", *command[1:]]
