from __future__ import annotations

from stepdoctor.model import ProfiledSpan, outlier_cut
from stepdoctor.rules import RuleContext
from stepdoctor.rules.step_outliers import step_outliers
from stepdoctor.timeline import timelines
from tests.builders import record, slowed, steps


def test_timeline_marks_exactly_the_step_outliers_rules_outliers() -> None:
    # Outliers every 20 steps, checkpoints every 37 and a slow warm-up step (none of them the
    # rule's), and 12 steps slowed under stepdoctor's own profiler (left out as well).
    s = steps(300, phases_ms={"forward": 10}, every={20: {"other": 40}, 37: {"checkpoint": 40}})
    s = slowed(slowed(s, range(5, 6), forward_ms=40), range(120, 132), forward_ms=40)
    span = ProfiledSpan(start_ns=s[120].start_ns + 1, end_ns=s[131].end_ns - 1)
    rec = record(s, profiled=(span,))
    ctx = RuleContext(rec)
    warm = ctx.summary.warmup_steps
    assert warm > 5

    line = timelines(rec, warm).steps
    assert line is not None
    marked = [index for index, _ in line.outliers]
    assert marked == [st.index for st in outlier_cut(ctx.steps).outliers]
    assert marked == list(range(39, 300, 20))

    (finding,) = step_outliers(ctx)
    evidence = {e.metric: e.value for e in finding.evidence}
    assert evidence["outlier steps"] == len(marked)
    assert evidence["when"] == "every 20 steps"
    cut_ms = evidence["outlier threshold (mean + 3σ)"]
    assert isinstance(cut_ms, float)
    assert min(ms for _, ms in line.outliers) > cut_ms
    # Longer than the cut, yet not the rule's outliers, so not marked either: warm-up (5, 19),
    # under the profiler, checkpoints.
    others = [st for st in s if st.duration_ns / 1e6 > cut_ms and st.index not in marked]
    assert {st.index for st in others} == {5, 19, *range(120, 132), *range(36, 300, 37)}


def test_gc_pauses_are_drawn_out_of_the_phase_they_interrupted() -> None:
    """A 4 ms pause inside a 10 ms forward: 6 ms of forward and 4 ms of GC, stacked, are the
    10 ms step (not 14)."""
    import dataclasses

    s = steps(40, phases_ms={"forward": 10, "optimizer": 2})
    s = [
        dataclasses.replace(
            st, gc_count=1, gc_pause_ns=4_000_000, gc_phase_ns={"forward": 4_000_000}
        )
        if st.index % 2
        else st
        for st in s
    ]
    line = timelines(record(s), 0).steps
    assert line is not None and line.bucket == 1
    for i, st in enumerate(s):
        stacked = sum(values[i] for values in line.phase_ms.values())
        assert stacked == st.duration_ns / 1e6
        assert line.phase_ms["gc"][i] == (4.0 if st.index % 2 else 0.0)
