"""FusedWaits: a compiled step's wait for its batch, from when the batches were made and when
the calls began, whichever thread says its time second."""

from __future__ import annotations

from stepdoctor.integrations._timing import FusedWaits


def _waits(per_call: int = 1) -> tuple[FusedWaits, list[int]]:
    waits = FusedWaits(per_call)
    seen: list[int] = []
    waits.on_wait = seen.append
    return waits, seen


def test_a_batch_ready_before_its_call_is_no_wait_and_a_late_one_is_waited_for() -> None:
    waits, seen = _waits()
    waits.made(5)  # batch 0, read ahead (Keras's peek)
    waits.made(8)  # batch 1, prefetched
    waits.call_begins(10)  # call 0 takes batch 0: ready
    waits.call_begins(20)  # call 1 takes batch 1: ready
    waits.call_begins(30)  # call 2: its batch is not made yet
    waits.made(45)  # ... now: 15 waited
    assert seen == [0, 0, 15]


def test_calls_of_several_batches_wait_for_their_last() -> None:
    waits, seen = _waits(per_call=2)
    waits.call_begins(10)  # takes batches 0 and 1
    waits.made(4)
    waits.made(17)  # its last: 7 waited
    waits.made(18)
    waits.call_begins(20)  # batches 2 and 3
    waits.made(21)
    assert seen == [7, 1]
