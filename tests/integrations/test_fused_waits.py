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
    waits.made(9)  # batch 2, prefetched
    waits.call_begins(10)  # call 0 takes batch 0 (the first call: it traces, left out)
    waits.call_begins(20)  # call 1 takes batch 1: ready
    waits.call_begins(25)  # call 2 takes batch 2: ready
    waits.call_begins(30)  # call 3: its batch is not made yet
    waits.made(45)  # ... now: 15 waited
    assert seen == [0, 0, 15]


def test_the_first_call_is_no_wait_however_late_its_batch() -> None:
    """The first call traces the step's graph before it fetches: its time is no wait."""
    waits, seen = _waits()
    waits.call_begins(10)
    waits.made(300)
    waits.call_begins(310)
    waits.made(320)
    assert seen == [10]


def test_calls_of_several_batches_wait_for_their_last() -> None:
    waits, seen = _waits(per_call=2)
    waits.call_begins(0)  # the first call (batches 0 and 1), left out
    waits.made(1)
    waits.made(2)
    waits.call_begins(10)  # takes batches 2 and 3
    waits.made(4)
    waits.made(17)  # its last: 7 waited
    waits.made(18)
    waits.call_begins(20)  # batches 4 and 5
    waits.made(21)
    assert seen == [7, 1]


def test_a_step_traced_before_keeps_its_first_call_and_a_call_that_raised_takes_no_batch() -> None:
    """A second fit of the same model: its compiled step is not traced again, its first call
    waits like the others. A call that raised (the pipeline's end, where its length is not
    known) is withdrawn: the next call takes the next batch."""
    waits, seen = _waits()
    waits.skip_first = False
    waits.call_begins(10)
    waits.made(15)  # 5 waited
    waits.call_begins(20)  # raises: no batch left this epoch
    waits.call_failed()
    waits.call_begins(40)  # the next epoch's first call
    waits.made(43)
    assert seen == [5, 3]
