"""Where in the code: a phase's samples attributed to the innermost function of the job's own
code, with the library call it made; too few samples say nothing; findings of the rules that
declare phases carry their sites; allocation sites filtered and ranked."""

from __future__ import annotations

import dataclasses

import pytest

from stepdoctor.model import GC_PHASE, AllocationSite, StackSample
from stepdoctor.report import build_report
from stepdoctor.rules.where import (
    MIN_PHASE_SAMPLES,
    allocation_sites,
    display_name,
    phase_sites,
    stack_counts,
)
from tests.builders import record, stacked, steps

LOOP = ("<module>", "train")
NEXT = ("DataLoader.__next__", "fetch")  # library


def _rec(phases: dict[str, list[tuple[tuple[str, ...], int]]]):  # type: ignore[no-untyped-def]
    s = steps(50, phases_ms={"data_wait": 30, "forward": 5, "backward": 5})
    return stacked(record(s), phases, library=(*NEXT, "json.loads"))


def test_samples_go_to_the_innermost_function_of_the_jobs_code() -> None:
    rec = _rec({
        "data_wait": [
            ((*LOOP, *NEXT, "Records.__getitem__", "parse", "json.loads"), 62),
            ((*LOOP, *NEXT, "Records.__getitem__"), 30),
            ((*LOOP, *NEXT), 8),
        ],
        "forward": [((*LOOP, "Net.forward"), 40)],
    })  # fmt: skip
    sites = phase_sites(rec, ["data_wait"])
    assert [(s.function, round(s.share, 2)) for s in sites] == [
        ("parse", 0.62), ("Records.__getitem__", 0.30), ("train", 0.08),
    ]  # fmt: skip
    parse, getitem, train = sites
    assert parse.calls == "lib.json.loads" and parse.phase == "data_wait"
    assert train.calls == "lib.DataLoader.__next__"  # the library entry the loop called
    assert getitem.total_share == pytest.approx(0.92) and getitem.self_share == pytest.approx(0.3)
    assert parse.self_share == 0.0 and parse.samples == 62  # json.loads is innermost


def test_a_site_names_the_line_most_of_its_samples_were_at() -> None:
    rec = _rec({"data_wait": [((*LOOP, "parse"), 20)]})
    at = [dataclasses.replace(s, line=41 if i % 4 else 7) for i, s in enumerate(rec.samples)]
    (site,) = phase_sites(dataclasses.replace(rec, samples=tuple(at)), ["data_wait"])
    assert site.line == 41


def test_too_few_samples_or_tiny_sites_say_nothing() -> None:
    rec = _rec({
        "data_wait": [((*LOOP, "parse"), MIN_PHASE_SAMPLES - 1)],
        "forward": [((*LOOP, "Net.forward"), 96), ((*LOOP, "hook"), 4)],
    })  # fmt: skip
    assert phase_sites(rec, ["data_wait"]) == ()
    assert [s.function for s in phase_sites(rec, ["forward"])] == ["Net.forward"]  # 4% is noise


def test_full_collections_are_events_counted_one_by_one() -> None:
    rec = _rec({GC_PHASE: [((*LOOP, "after_step"), 2)]})
    (site,) = phase_sites(rec, [GC_PHASE])
    assert site.function == "after_step" and site.share == 1.0


def test_samples_outside_the_span_or_of_unknown_stacks_are_left_out() -> None:
    rec = _rec({"data_wait": [((*LOOP, "parse"), 30)]})
    unknown = StackSample(t_ns=rec.samples[0].t_ns, stack=999, phase="data_wait")
    rec = dataclasses.replace(rec, samples=(*rec.samples, unknown))
    late = rec.samples[20].t_ns
    (site,) = phase_sites(rec, ["data_wait"])
    assert site.samples == 30
    assert phase_sites(rec, ["data_wait"], span_ns=(late, late)) == ()  # one sample is too few


def test_the_input_bound_finding_shows_its_sites() -> None:
    rec = _rec({"data_wait": [((*LOOP, *NEXT, "Records.__getitem__", "parse"), 50)]})
    report = build_report(rec)
    finding = next(f for f in report.findings if f.rule == "input-bound")
    assert [(w.function, w.phase) for w in finding.where] == [("parse", "data_wait")]
    frames, stacks, counts = stack_counts(rec)
    assert report.stack_counts == counts and len(stacks) == 1 and len(frames) == 6


def test_display_names_read_as_imports() -> None:
    rec = _rec({"data_wait": [((*LOOP, "parse"), 10)]})
    torch_init = "/v/lib/python3.11/site-packages/torch/__init__.py"
    lib = dataclasses.replace(rec.frames[0], file=torch_init, function="save")
    std = dataclasses.replace(rec.frames[0], file="/usr/lib/python3.11/json/__init__.py",
                              function="loads")  # fmt: skip
    assert display_name(lib) == "torch.save" and display_name(std) == "json.loads"


def _site(kind: str, share: float, count: int) -> AllocationSite:
    return AllocationSite(kind=kind, file="/job/train.py", line=3, function="f", user=True,
                          count=count, size_bytes=1, share=share)  # fmt: skip


def test_allocation_sites_keep_large_shares_by_bytes_or_by_count() -> None:
    rec = record(steps(3, phases_ms={"forward": 1}))
    kept = (_site("tensors", 0.97, 3), _site("tensors", 0.01, 40), _site("tensors", 0.02, 1))
    rec = dataclasses.replace(rec, allocations=(*kept, _site("gc", 1.0, 5)))
    assert [a.count for a in allocation_sites(rec, "tensors")] == [3, 40]
    assert [a.kind for a in allocation_sites(rec, "gc")] == ["gc"]
