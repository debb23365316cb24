"""The Perfetto / Chrome trace of a run: valid Trace Event Format, a slice per phase per step,
counters for CPU, memory and GPU, GC as instants."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import jsonschema

from stepdoctor.model import GpuSample, ProfiledSpan
from stepdoctor.render.perfetto import render_perfetto
from tests.builders import meta, record, samples, steps
from tests.cli.test_cli import _run
from tests.marks import needs_torch

SCHEMA = json.loads((Path(__file__).parents[1] / "data" / "chrome_trace_schema.json").read_text())


def _built() -> dict[str, Any]:
    s = steps(20, phases_ms={"data_wait": 3, "forward": 10, "backward": 20}, gc_ms=1.5)
    gpu = tuple(
        GpuSample(t_ns=i * 100_000_000, index=0, util_pct=80.0, mem_used_bytes=2**30,
                  mem_total_bytes=16 * 2**30)
        for i in range(5)
    )  # fmt: skip
    rec = record(s, system=samples(s), gpu=gpu)
    hostile = ("train.py", '<script>alert("x")</script>', "a\\b")
    rec = dataclasses.replace(rec, meta=dataclasses.replace(meta(), command=hostile))
    trace: dict[str, Any] = json.loads(render_perfetto(rec))
    return trace


def test_trace_is_valid_trace_event_format() -> None:
    trace = _built()
    jsonschema.validate(trace, SCHEMA)
    # A broken event is caught by the same check (the schema is not vacuous).
    broken = {"traceEvents": [{"name": "x", "ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": -1}]}
    try:
        jsonschema.validate(broken, SCHEMA)
    except jsonschema.ValidationError:
        pass
    else:
        raise AssertionError("a negative duration passed the schema")


def test_one_slice_per_phase_per_step_counters_and_gc_instants() -> None:
    trace = _built()
    events = trace["traceEvents"]
    assert isinstance(events, list)
    names = {e["args"]["name"]: e["tid"] for e in events if e["name"] == "thread_name"}
    assert set(names) == {"steps", "data wait (ETL)", "forward", "backward"}
    by_track: dict[int, list[dict[str, object]]] = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            by_track[e["tid"]].append(e)
    assert len(by_track[names["steps"]]) == 20
    for phase, ms in (("forward", 10), ("backward", 20), ("data wait (ETL)", 3)):
        slices = by_track[names[phase]]
        assert len(slices) == 20
        assert all(s["dur"] == ms * 1000 for s in slices)
    # Phase slices start with their step, which starts where the previous one ended.
    steps_track = by_track[names["steps"]]
    assert [s["ts"] for s in steps_track] == [i * 33_000 for i in range(20)]
    counters = {e["name"] for e in events if e["ph"] == "C"}
    assert {"CPU (% of a core)", "memory (MiB)", "GPU 0 utilisation (%)",
            "GPU 0 memory (MiB)"} <= counters  # fmt: skip
    gc = [e for e in events if e["ph"] == "i"]
    assert len(gc) == 20 and gc[0]["args"]["total pause (ms)"] == 1.5
    # User strings are JSON strings, nothing more: they come back unchanged.
    assert '<script>alert("x")</script>' in trace["otherData"]["command"]


def test_the_span_stepdoctors_profiler_slowed_is_a_slice_of_its_own() -> None:
    s = steps(20, phases_ms={"forward": 10})
    rec = record(s, profiled=(ProfiledSpan(start_ns=s[5].start_ns, end_ns=s[11].end_ns),))
    trace = json.loads(render_perfetto(rec))
    jsonschema.validate(trace, SCHEMA)
    events = trace["traceEvents"]
    names = {e["args"]["name"]: e["tid"] for e in events if e["name"] == "thread_name"}
    (own,) = [e for e in events if e["ph"] == "X" and e["tid"] == names["stepdoctor"]]
    assert own["name"] == "torch.profiler capture (--trace)"
    assert (own["ts"], own["dur"]) == (5 * 10_000, 7 * 10_000)  # steps 5-11, 10 ms each
    plain = json.loads(render_perfetto(record(s)))["traceEvents"]
    assert "stepdoctor" not in {e["args"]["name"] for e in plain if e["name"] == "thread_name"}


@needs_torch
def test_report_writes_perfetto_of_a_real_run(tmp_path: Path) -> None:
    assert _run(tmp_path).returncode == 0
    out = tmp_path / "run.perfetto.json"
    proc = subprocess.run(
        [sys.executable, "-m", "stepdoctor", "report", str(tmp_path / "run"),
         "--format", "perfetto", "-o", str(out)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    trace = json.loads(out.read_text())
    jsonschema.validate(trace, SCHEMA)
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["name"].startswith("step ")]
    assert len(slices) == 30  # the script's 30 optimizer steps
