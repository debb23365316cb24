"""The sampler thread, C and Python twins alike: snapshots of files at an interval.

``make test`` sets ``STEPDOCTOR_REQUIRE_C_PARTS=1``: there the C sampler must have been built.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from stepdoctor.collect.sampling.sampler import (
    READ_MAX,
    PySampler,
    Sampler,
    Snapshot,
    native_sampler,
    new_sampler,
)
from stepdoctor.native import PURE_PYTHON_ENV

MS = 1_000_000
C = native_sampler()
REQUIRED = os.environ.get("STEPDOCTOR_REQUIRE_C_PARTS", "") == "1"
needs_c = pytest.mark.skipif(
    C is None and not REQUIRED, reason="the C sampler was not built (no compiler at install)"
)


@pytest.fixture(params=[pytest.param("c", marks=needs_c), "python"])
def make(request: pytest.FixtureRequest) -> Iterator[Callable[..., Sampler]]:
    made: list[Sampler] = []

    def build(interval_ns: int = MS, **kwargs: object) -> Sampler:
        sampler = new_sampler(interval_ns, native=request.param == "c", **kwargs)  # type: ignore[arg-type]
        made.append(sampler)
        return sampler

    yield build
    for sampler in made:
        sampler.stop()


def _wait_for(sampler: Sampler, count: int, *, timeout_s: float = 10.0) -> list[Snapshot]:
    """Snapshots until ``count`` were taken (a functional wait, not a timing check)."""
    got: list[Snapshot] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count and time.monotonic() < deadline:
        time.sleep(0.005)
        got += sampler.take()
    assert len(got) >= count, f"only {len(got)} snapshots in {timeout_s} s"
    return got


def test_snapshots_hold_each_files_bytes_as_they_change(
    make: Callable[..., Sampler], tmp_path: Path
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"first")
    b.write_bytes(b"")
    sampler = make()
    generation = sampler.set_files([str(a), str(b), str(tmp_path / "missing")])
    before = time.monotonic_ns()
    sampler.start()
    first = _wait_for(sampler, 1)
    a.write_bytes(b"second, longer")
    later = _wait_for(sampler, 2)
    sampler.stop()
    snaps = first + later
    times = [t for t, _, _ in snaps]
    assert before < times[0] and times == sorted(times) and times[-1] <= time.monotonic_ns()
    assert {g for _, g, _ in snaps} == {generation}
    assert snaps[0][2] == (b"first", b"", None)
    assert snaps[-1][2] == (b"second, longer", b"", None)


def test_new_files_are_read_from_the_next_tick_under_a_new_generation(
    make: Callable[..., Sampler], tmp_path: Path
) -> None:
    (tmp_path / "a").write_bytes(b"A")
    (tmp_path / "b").write_bytes(b"B")
    sampler = make()
    sampler.start()
    assert _wait_for(sampler, 1)[0][1:] == (0, ())  # no files yet: empty snapshots
    one = sampler.set_files([str(tmp_path / "a")])
    sampler.take()
    two = sampler.set_files([str(tmp_path / "b"), str(tmp_path / "a")])
    assert two == one + 1
    snaps = _wait_for(sampler, 1)
    assert snaps[-1][1:] == (two, (b"B", b"A"))
    assert all(g in (one, two) for _, g, _ in snaps)


def test_a_process_that_ends_reads_as_none(make: Callable[..., Sampler]) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    sampler = make()
    sampler.set_files([f"/proc/{child.pid}/stat"])
    sampler.start()
    (content,) = _wait_for(sampler, 1)[-1][2]
    assert content is not None and content.startswith(f"{child.pid} (".encode())
    child.kill()
    child.wait()
    sampler.take()
    # the descriptor stays tied to the ended process, even if its pid comes back
    assert _wait_for(sampler, 1)[-1][2] == (None,)


def test_a_late_take_gets_the_newest_snapshots_and_a_count_of_the_rest(
    make: Callable[..., Sampler], tmp_path: Path
) -> None:
    (tmp_path / "a").write_bytes(b"x")
    sampler = make(capacity=3)
    sampler.set_files([str(tmp_path / "a")])
    sampler.start()
    while sampler.dropped < 5:
        time.sleep(0.005)
    sampler.stop()
    snaps = sampler.take()
    assert len(snaps) == 3 and [t for t, _, _ in snaps] == sorted(t for t, _, _ in snaps)
    assert sampler.take() == []


def test_large_files_are_read_whole_up_to_the_limit(
    make: Callable[..., Sampler], tmp_path: Path
) -> None:
    big, huge = tmp_path / "big", tmp_path / "huge"
    big.write_bytes(bytes(range(256)) * 1000)  # past the C one's first 64 KiB buffer
    huge.write_bytes(b"y" * (READ_MAX + 10))
    sampler = make()
    sampler.set_files([str(big), str(huge)])
    sampler.start()
    (_, _, (got_big, got_huge)), *_ = _wait_for(sampler, 1)
    assert got_big == big.read_bytes()
    assert got_huge == b"y" * READ_MAX


def test_stop_and_start_are_safe_to_repeat_and_refuse_bad_arguments(
    make: Callable[..., Sampler],
) -> None:
    sampler = make()
    sampler.stop()  # never started
    assert sampler.cpu_ns == 0
    sampler.start()
    sampler.start()
    _wait_for(sampler, 2)
    sampler.stop()
    sampler.stop()
    assert sampler.cpu_ns > 0  # the thread's own CPU time
    with pytest.raises(ValueError, match="must be positive"):
        make(0)
    with pytest.raises(ValueError, match="must be positive"):
        make(MS, capacity=0)


def test_a_forked_child_neither_reads_nor_joins(
    make: Callable[..., Sampler], tmp_path: Path
) -> None:
    (tmp_path / "a").write_bytes(b"x")
    sampler = make()
    sampler.set_files([str(tmp_path / "a")])
    sampler.start()
    _wait_for(sampler, 1)
    pid = os.fork()
    if pid == 0:  # the child: a DataLoader worker would be here
        code = 0
        try:
            code = 1 if sampler.take() != [] else 0
            sampler.stop()
            try:
                sampler.set_files([])
                code = 2
            except RuntimeError:
                pass
            del sampler
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert _wait_for(sampler, 1)  # the parent's thread carries on


@needs_c
def test_the_c_sampler_is_built_and_refuses_to_work_uninitialised() -> None:
    assert C is not None, "STEPDOCTOR_REQUIRE_C_PARTS=1 but collect/sampling/_sample is not built"
    sampler = C.Sampler.__new__(C.Sampler)
    with pytest.raises(RuntimeError):
        sampler.take()
    with pytest.raises(RuntimeError):
        sampler.start()
    del sampler  # freed without its __init__ having run


def test_stop_closes_the_files(make: Callable[..., Sampler], tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"x")
    sampler = make()
    sampler.set_files([str(tmp_path / "a")])
    fds = len(os.listdir("/proc/self/fd"))
    sampler.start()
    _wait_for(sampler, 1)
    sampler.stop()
    assert len(os.listdir("/proc/self/fd")) == fds - 1
    sampler.stop()  # again: nothing


@needs_c
def test_pure_python_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PURE_PYTHON_ENV, "1")
    assert native_sampler() is None
    assert isinstance(new_sampler(MS), PySampler)
    with pytest.raises(RuntimeError, match="C sampler"):
        new_sampler(MS, native=True)
    monkeypatch.setenv(PURE_PYTHON_ENV, "0")
    assert not isinstance(new_sampler(MS), PySampler)
