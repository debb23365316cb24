"""The launcher's stall watch: steps counted from what the ranks' records gain, a stall said
once when no rank gained a step for a while, and the waiting ranks told from the stuck one."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from stepdoctor.jobs.stall import StallWatch, stall_findings
from stepdoctor.record import RecordWriter
from stepdoctor.render.job import render_stall
from tests.builders import meta, record, stacked
from tests.builders import steps as _steps


def steps(n: int) -> tuple:  # type: ignore[type-arg]
    return _steps(n, phases_ms={"forward": 5})


def _writer(job: Path, rank: int) -> RecordWriter:
    return RecordWriter(job / f"rank-{rank}", dataclasses.replace(meta(), rank=rank, world_size=2))


def test_a_stall_is_said_once_when_no_rank_gains_a_step(tmp_path: Path) -> None:
    now = [0.0]
    watch = StallWatch(tmp_path, world=2, after_s=10.0, clock=lambda: now[0])
    writers = {0: _writer(tmp_path, 0)}
    writers[0].write_items("steps", steps(5))
    writers[0].flush()
    assert not watch.poll() and watch.steps == {0: 5}  # rank 1 has no record yet
    now[0] = 50.0
    assert not watch.poll()  # a rank missing: no stall before every rank has a record
    writers[1] = _writer(tmp_path, 1)
    writers[1].write_items("steps", steps(3))
    writers[1].flush()
    assert not watch.poll() and watch.steps == {0: 5, 1: 3}
    now[0] = 55.0
    writers[0].write_items("system", [])  # lines that are not steps: no progress
    writers[0].flush()
    assert not watch.poll()
    now[0] = 60.5
    assert watch.poll() and watch.idle_s == 10.5  # said once...
    now[0] = 90.0
    assert not watch.poll()
    writers[1].write_items("steps", steps(2))  # ...and again only after a step and a stall
    writers[1].flush()
    assert not watch.poll() and watch.steps[1] == 5
    now[0] = 101.0
    assert watch.poll()
    for w in writers.values():
        w.close()


def test_a_line_read_half_written_is_counted_when_whole(tmp_path: Path) -> None:
    watch = StallWatch(tmp_path, world=1, after_s=10.0, clock=lambda: 0.0)
    w = _writer(tmp_path, 0)
    w.write_items("steps", steps(4))
    w.close()
    path = tmp_path / "rank-0" / "run.jsonl"
    whole = path.read_bytes()
    cut = whole.rindex(b'"rows"')
    path.write_bytes(whole[:cut])
    assert not watch.poll() and watch.steps == {0: 0}
    path.write_bytes(whole)
    watch.poll()
    assert watch.steps == {0: 4}


def test_the_stall_names_the_rank_the_others_wait_for(tmp_path: Path) -> None:
    ranks = {
        0: stacked(record(_steps(20, phases_ms={"forward": 5, "backward": 5})),
                   {"backward": [(("main", "bwd"), 20)]}),
        1: stacked(record(_steps(20, phases_ms={"forward": 5, "backward": 5})),
                   {"other": [(("main", "wait_for_reply", "Event.wait"), 20)]},
                   library=("Event.wait",)),
    }  # fmt: skip
    now = [0.0]
    watch = StallWatch(tmp_path, world=2, after_s=5.0, clock=lambda: now[0])
    for rank, rec in ranks.items():
        w = _writer(tmp_path, rank)
        for kind, items in (("steps", rec.steps), ("frame", rec.frames), ("stack", rec.stacks),
                            ("sample", rec.samples)):  # fmt: skip
            w.write_items(kind, items)
        w.close()  # no end line: the ranks are still running
    watch.poll()
    now[0] = 6.0
    assert watch.poll()
    rows, findings = stall_findings(tmp_path)
    text = render_stall(watch.steps, watch.idle_s, rows, findings, width=200)
    assert "no rank has completed a step for 6 s (steps so far: rank 0: 20, rank 1: 20)" in text
    assert "Rank 1 stopped stepping; rank(s) 0 wait for it" in text
    assert "it is still there" in text and "wait_for_reply" in text


def test_a_record_left_by_an_earlier_run_is_not_this_runs_progress(tmp_path: Path) -> None:
    old = _writer(tmp_path, 0)
    old.write_items("steps", steps(7))
    old.close()
    watch = StallWatch(tmp_path, world=1, after_s=1.0, clock=lambda: 10.0)
    assert not watch.poll() and watch.steps == {0: 0}  # start-up of this run: no stall
