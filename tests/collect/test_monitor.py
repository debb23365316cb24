"""The monitor's wake-ups (``reduce.monitor.WakeSchedule``): one at a random point of each slot
of a grid, so that what it reads (the heap) falls at independent points of a job's steps."""

from __future__ import annotations

import pytest

from stepdoctor.collect.reduce.monitor import WakeSchedule


class _Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_each_wake_up_falls_at_its_phase_of_its_own_slot() -> None:
    clock, phases = _Clock(), iter([0.9, 0.1, 0.5, 0.0, 0.99])
    schedule = WakeSchedule(0.5, lambda: next(phases), now=clock)
    wakes = []
    for _ in range(5):
        clock.t += schedule.next_wait_s()  # the thread sleeps till then
        wakes.append(clock.t - 100.0)
    assert wakes == pytest.approx([0.45, 0.55, 1.25, 1.5, 2.495])
    # gaps from 0 to two intervals, the slots' phases independent of each other
    assert [int(w // 0.5) for w in wakes] == [0, 1, 2, 3, 4]


def test_a_thread_that_fell_behind_starts_the_grid_again_without_a_burst() -> None:
    clock = _Clock()
    schedule = WakeSchedule(0.5, lambda: 0.5, now=clock)
    clock.t += schedule.next_wait_s()  # 100.25
    clock.t += 3.0  # held up for six slots
    wait = schedule.next_wait_s()
    assert wait == pytest.approx(0.25)  # in the slot that starts now, not at once
    clock.t += wait
    assert schedule.next_wait_s() == pytest.approx(0.5)
