"""Shared fixtures: every test must leave no thread, GC callback or torch patch behind."""

from __future__ import annotations

import gc
import os
import sys
import threading
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings


def _torch_state() -> tuple[object, ...]:
    torch = sys.modules.get("torch")
    if torch is None:
        return ()
    from torch.utils.data import dataloader as dl

    return (
        torch.nn.Module.__dict__["__call__"],
        torch.autograd.backward,
        torch.save,
        dl._BaseDataLoaderIter.__dict__["__next__"],
        dl.DataLoader.__dict__["__iter__"],
    )


# CI draws the same examples every run (derandomize): a red CI is a regression, not luck, and
# it draws no new ones either, so the search for the examples that break a property is the
# "hunt" profile's (HYPOTHESIS_PROFILE=hunt), not make test's. No deadline and no too-slow
# health check: how fast an example runs is the machine's, not ours.
_SPEED_FREE = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile("ci", max_examples=100, derandomize=True, **_SPEED_FREE)
settings.register_profile("hunt", max_examples=10_000, **_SPEED_FREE)
# make test-pythons: the same tests on every other interpreter, where what breaks is the
# interpreter's (an import, the C parts' build, a watched job), not an example only the 100th
# draw finds: make test's run searches that far on the main one.
settings.register_profile("pythons", max_examples=30, derandomize=True, **_SPEED_FREE)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


#: What other processes must leave of a core for ``-n auto`` to give it a worker of its own.
IDLE_CORE_SHARE = 0.5


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (make test): one worker per core the machine's other processes leave idle,
    at least one. A scenario run beside another is a run on a busy machine; beside two more
    busy processes (the loaded fresh-clone check: 4 busy processes on 2 cores, the jobs got
    ~0.45 of a core) fixed twins drew findings from their starved steps."""
    from tests._machine import busy_cores

    cores = len(os.sched_getaffinity(0))
    return max(1, min(cores, int(cores - busy_cores() + IDLE_CORE_SHARE)))


def _our_callbacks() -> list[object]:
    """stepdoctor's GC callbacks (hypothesis adds one of its own for good, on first use)."""
    return [c for c in gc.callbacks if getattr(c, "__module__", "").startswith("stepdoctor")]


@pytest.fixture(autouse=True, scope="session")
def own_cache_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The tests (and the jobs they run) keep py-cpuinfo's answer in a folder of their own,
    not in the user's cache folder."""
    before = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if before is None:
        del os.environ["XDG_CACHE_HOME"]
    else:
        os.environ["XDG_CACHE_HOME"] = before


@pytest.fixture(autouse=True)
def machine_shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Each test holds the machine shared: a job redone alone (``tests/_machine.py``) waits
    for the tests running beside it and runs before the next ones start. The lock is kept in
    the folder above the worker's base temporary folder (``popen-gwN``): the session's own."""
    from tests._machine import share_the_machine

    with share_the_machine(tmp_path_factory.getbasetemp().parent):
        yield


#: How long a probe thread that outlived its deadline may take to end before it counts as left
#: running (py-cpuinfo's child process took several seconds on a machine with 4 busy
#: processes on its 2 cores).
PROBE_GRACE_S = 30.0


@pytest.fixture(autouse=True)
def no_leaks() -> Iterator[None]:
    """Fail a test that leaves a stepdoctor thread, GC callback, session or patch behind."""
    from stepdoctor.collect import current_session

    callbacks = _our_callbacks()
    torch_before = _torch_state()
    yield
    for thread in threading.enumerate():
        # a probe past its deadline is left to end on its own (probes/environment.py: a daemon,
        # so a hanging library cannot keep the job alive); on a loaded machine py-cpuinfo's
        # child can outlast the deadline by seconds: only one still running after that leaks
        if thread.name.startswith("stepdoctor-probe-"):
            thread.join(PROBE_GRACE_S)
    leaked = [t.name for t in threading.enumerate() if t.name.startswith("stepdoctor")]
    assert not leaked, f"threads left running: {leaked}"
    assert _our_callbacks() == callbacks, "gc.callbacks changed"
    assert current_session() is None, "a session is still active"
    if torch_before:
        assert _torch_state() == torch_before, "torch patches left installed"


@pytest.hookimpl(hookwrapper=True, trylast=True)  # inside pytest-cov's own wrapper
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """A test marked ``no_cover`` runs without coverage.py's tracer, in pytest-xdist's workers
    too: the property, fuzz and stress tests that drive the same code over many inputs, which
    the other tests cover, ran 2-3.5x slower traced (``test_one_hour_run_stays_small_and_
    keeps_outliers``: 3.6 s, 12.3 s traced). pytest-cov 7 pauses only its own measurement, and
    a worker has two (stopping the newer one starts the older one's tracer again): inside
    pytest-cov's wrapper (``trylast``), each one still running is stopped, then started again
    in the order they were."""
    coverage = sys.modules.get("coverage")  # not imported: nothing measures
    stopped = []
    if coverage is not None and item.get_closest_marker("no_cover"):
        while (cov := coverage.Coverage.current()) is not None:
            cov.stop()
            stopped.append(cov)
    try:
        yield
    finally:
        for cov in reversed(stopped):
            cov.start()
