"""The machine the tests' jobs share, and a job's run redone with the machine to itself.

``make test`` spreads the tests over the cores (pytest-xdist): a scenario job then runs beside
the other workers' tests and their jobs, as on any busy machine. The zoo's verdicts are about
the job: a healthy job must stay silent, a planted fault must come out on top, *when the job has
the machine*. On a 2-core machine a job beside another job gets about half a core (CI: 0.53 of
a core, other processes 71% of the CPUs), and its starved steps read as faults of its own (data
waits at 11%, outlier steps). stepdoctor's verdict on such a run is right, and it leads with
``competing-processes``; it is not the verdict under test.

So every test holds a shared lock on the machine while it runs (``share_the_machine``, an
autouse fixture in ``conftest.py``), and a verdict that fails on a run whose own record shows
other processes taking the CPUs (``_verdicts.machine_was_busy``) is judged again on a second run
made under the exclusive lock (``judged``): no other test runs beside it. "Busy" is read over
the steps the verdict is read from (after the report's warm-up). A verdict that fails
on a run that had the machine fails at once, and the second run's verdict is final. Each redone
run is reported in the test summary's warnings. Outside pytest-xdist (the serial part, a single
test) there is no lock: the second run still happens, beside whatever else the machine runs.
"""

from __future__ import annotations

import fcntl
import os
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from tests.scenarios._verdicts import machine_was_busy, others_share

__all__ = ["RedoneAlone", "alone_on_the_machine", "busy_cores", "judged", "share_the_machine"]

T = TypeVar("T")


def busy_cores(interval_s: float = 1.0) -> float:
    """How many cores' worth of CPU the machine's processes use, over ``interval_s``."""
    import psutil

    return psutil.cpu_percent(interval=interval_s) / 100 * (psutil.cpu_count() or 1)


class RedoneAlone(UserWarning):
    """A verdict judged again on a run made with no other test beside it. pyproject.toml's
    ``filterwarnings`` keeps it a warning by its message ("judged again on a run alone"): a
    filter naming this class would import the tests, and through them stepdoctor, before
    coverage starts."""


def _lock_paths(folder: Path) -> tuple[Path, Path] | None:
    """The lock and its turnstile, one pair per pytest-xdist session, in ``folder`` (the
    session's base temporary folder, which every worker shares and pytest removes in turn with
    the old ones); None outside pytest-xdist."""
    if not os.environ.get("PYTEST_XDIST_TESTRUNUID"):
        return None
    return folder / "machine.lock", folder / "machine.gate"


class _Machine:
    """This worker's hold on the machine's lock (fcntl.flock: released by the kernel if the
    worker dies). The turnstile makes a waiting exclusive hold go first: a test that starts while
    one waits queues behind it, so a steady flow of shared holds cannot starve it."""

    def __init__(self, lock: Path, gate: Path) -> None:
        self._lock = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        self._gate = os.open(gate, os.O_RDWR | os.O_CREAT, 0o600)

    def share(self) -> None:
        fcntl.flock(self._gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._lock, fcntl.LOCK_SH)
        finally:
            fcntl.flock(self._gate, fcntl.LOCK_UN)

    def release(self) -> None:
        fcntl.flock(self._lock, fcntl.LOCK_UN)

    @contextmanager
    def alone(self) -> Iterator[None]:
        # Drop the shared hold first: two workers waiting to be alone must not each hold what
        # the other waits for.
        self.release()
        fcntl.flock(self._gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(self._lock, fcntl.LOCK_SH)  # back to sharing, still ahead of others
        finally:
            fcntl.flock(self._gate, fcntl.LOCK_UN)


_machine: _Machine | None = None


@contextmanager
def share_the_machine(folder: Path) -> Iterator[None]:
    """Hold the machine shared for the length of a test (pytest-xdist workers only); the lock
    is kept in ``folder``, the same for every worker of the session."""
    global _machine
    paths = _lock_paths(folder)
    if paths is None:
        yield
        return
    if _machine is None:
        _machine = _Machine(*paths)
    _machine.share()
    try:
        yield
    finally:
        _machine.release()


@contextmanager
def alone_on_the_machine() -> Iterator[None]:
    """No other test runs while this holds (inside ``share_the_machine``; else no-op)."""
    if _machine is None:  # not a pytest-xdist worker
        yield
        return
    with _machine.alone():
        yield


def _folder(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


def judged(
    run: Callable[[Path], T],
    window: Callable[[T], tuple[Path, int]],
    judge: Callable[[T], None],
    tmp_path: Path,
    *,
    again: bool = True,
) -> T:
    """``run`` a job into a folder under ``tmp_path`` and ``judge`` it (an assertion); if the
    verdict fails on a run that shared a busy machine, run it again alone and judge that run
    (not with ``again=False``: a verdict expected to fail, whose failure needs no second run).
    ``window``: the run's folder and its warm-up steps (the report's), so that "busy" is read
    over the steps the verdict was read from (``about_the_job`` asserts over the same ones)."""
    first = run(_folder(tmp_path / "shared"))
    try:
        judge(first)
    except AssertionError as failed:
        folder, warmup = window(first)
        if not again or not machine_was_busy(folder, warmup):
            raise
        why = (str(failed) or "assert").splitlines()[0][:160]
        share = others_share(folder, warmup)
        warnings.warn(
            RedoneAlone(
                f"judged again on a run alone: other processes took {share:.0%} of the CPUs"
                f" and the verdict failed ({why})"
            ),
            stacklevel=2,
        )
        with alone_on_the_machine():
            second = run(_folder(tmp_path / "alone"))
        judge(second)
        return second
    return first
