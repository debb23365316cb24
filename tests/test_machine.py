"""The tests' own lock on the machine (``tests/_machine.py``): a run made alone excludes every
test sharing the machine, and a verdict is judged again only when it failed on a busy machine."""

from __future__ import annotations

import contextlib
import fcntl
import multiprocessing
import os
import threading
import time
import warnings
from pathlib import Path

import pytest

from tests import _machine
from tests._machine import RedoneAlone, _Machine, judged


def _hold_shared(lock: Path, gate: Path, log: Path, holding: object, go: object) -> None:
    machine = _Machine(lock, gate)
    machine.share()
    holding.set()  # type: ignore[attr-defined]
    go.wait(30)  # type: ignore[attr-defined]
    with log.open("a") as out:
        out.write("shared done\n")
    machine.release()


def _arrive_shared(lock: Path, gate: Path, log: Path, arriving: object) -> None:
    machine = _Machine(lock, gate)
    arriving.set()  # type: ignore[attr-defined]
    machine.share()
    with log.open("a") as out:
        out.write("late sharer in\n")
    machine.release()


def _held(path: Path) -> bool:
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops a lock this probe took
    return False


def test_a_run_alone_waits_for_the_sharers_and_goes_before_later_ones(tmp_path: Path) -> None:
    lock, gate, log = tmp_path / "m.lock", tmp_path / "m.gate", tmp_path / "log"
    ctx = multiprocessing.get_context("spawn")
    holding, go = ctx.Event(), ctx.Event()
    sharer = ctx.Process(target=_hold_shared, args=(lock, gate, log, holding, go))
    sharer.start()
    assert holding.wait(60)
    me = _Machine(lock, gate)
    me.share()  # as a test does, then asks to be alone

    def alone() -> None:
        with me.alone(), log.open("a") as out:
            out.write("alone\n")
        me.release()

    waiting = threading.Thread(target=alone)
    waiting.start()
    deadline = time.monotonic() + 60
    while not _held(gate):  # it waits for the other test, holding the turnstile
        assert time.monotonic() < deadline, "the turnstile was never taken"
        time.sleep(0.01)
    arriving = ctx.Event()
    late = ctx.Process(target=_arrive_shared, args=(lock, gate, log, arriving))
    late.start()  # a test that starts now could share with the first one, but must queue
    assert arriving.wait(60)
    time.sleep(0.5)  # room for it to get in, were the turnstile not there
    go.set()
    waiting.join(30)
    sharer.join(30)
    late.join(30)
    assert log.read_text().splitlines() == ["shared done", "alone", "late sharer in"]


def _busy(busy: bool, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Say the machine was ``busy``; what warm-up the checks were asked to leave out. The run
    alone takes no real lock: under pytest-xdist it would pause every other worker."""
    asked: list[int] = []

    def was_busy(folder: Path, warmup: int) -> bool:
        asked.append(warmup)
        return busy

    monkeypatch.setattr(_machine, "machine_was_busy", was_busy)
    monkeypatch.setattr(_machine, "others_share", lambda folder, warmup: 0.71 if busy else 0.0)
    monkeypatch.setattr(_machine, "alone_on_the_machine", contextlib.nullcontext)
    return asked


def _runs(verdicts: list[bool]) -> tuple[list[Path], object, object]:
    folders: list[Path] = []

    def run(folder: Path) -> bool:
        folders.append(folder)
        return verdicts[len(folders) - 1]

    def judge(ok: bool) -> None:
        assert ok, "a warning on the healthy job"

    return folders, run, judge


def test_a_verdict_failed_on_a_busy_machine_is_judged_on_a_run_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = _busy(True, monkeypatch)
    folders, run, judge = _runs([False, True])
    with pytest.warns(RedoneAlone, match="other processes took 71%.*a warning on the healthy job"):
        assert judged(run, lambda r: (tmp_path, 5), judge, tmp_path) is True  # type: ignore[arg-type]
    assert folders == [tmp_path / "shared", tmp_path / "alone"]
    assert asked == [5]  # busy over the steps the verdict was read from, after the warm-up
    folders, run, judge = _runs([False, False])
    with pytest.warns(RedoneAlone), pytest.raises(AssertionError, match="healthy job"):
        judged(run, lambda r: (tmp_path, 5), judge, tmp_path / "again")  # type: ignore[arg-type]
    assert len(folders) == 2  # the second verdict is final


def test_a_verdict_failed_on_a_quiet_machine_fails_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _busy(False, monkeypatch)
    folders, run, judge = _runs([False, True])
    with pytest.raises(AssertionError, match="healthy job"):
        judged(run, lambda r: (tmp_path, 5), judge, tmp_path)  # type: ignore[arg-type]
    assert folders == [tmp_path / "shared"]
    folders, run, judge = _runs([True])
    _busy(True, monkeypatch)
    assert judged(run, lambda r: (tmp_path, 5), judge, tmp_path / "b") is True  # type: ignore[arg-type]
    assert len(folders) == 1  # a verdict that holds is never run again
    folders, run, judge = _runs([False, True])
    with pytest.raises(AssertionError, match="healthy job"):  # one expected to fail: once
        judged(run, lambda r: (tmp_path, 5), judge, tmp_path / "c", again=False)  # type: ignore[arg-type]
    assert len(folders) == 1


def test_a_verdict_judged_again_is_reported_in_the_summary_not_raised() -> None:
    """The project turns warnings into errors (pyproject.toml): not this one."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.warn(RedoneAlone("judged again on a run alone"), stacklevel=1)
    assert [type(w.message) for w in seen] == [RedoneAlone]
