"""Session end to end in-process: hot-path API, torch patches, readers, record, failures."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest
import torch

from stepdoctor import build_report, watch
from stepdoctor.collect import Session
from stepdoctor.collect.reduce.monitor import MONITOR_NICE
from stepdoctor.collect.sampling.procfs import ProcFs
from stepdoctor.collect.sampling.readers import PsutilReader
from stepdoctor.collect.session import FLUSH_EVERY_S
from stepdoctor.errors import UsageError
from stepdoctor.model import GpuSample, SystemSample
from stepdoctor.native import PURE_PYTHON_ENV
from stepdoctor.record import load_run


class FixedReader:
    name = "fixed"

    def read(self, t_ns: int) -> list[SystemSample | GpuSample]:
        return [SystemSample(t_ns=t_ns, job_cpu_pct=100.0, other_cpu_pct=0.0)]


class BrokenReader:
    name = "broken"

    def read(self, t_ns: int) -> list[SystemSample | GpuSample]:
        raise OSError("sensor gone")


def _train(steps: int, batch: int = 8, *, dtype: torch.dtype = torch.float32) -> None:
    data = torch.utils.data.TensorDataset(
        torch.randn(steps * batch, 4, dtype=dtype), torch.randn(steps * batch, 1, dtype=dtype)
    )
    loader = torch.utils.data.DataLoader(data, batch_size=batch)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 1)).to(dtype)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for x, y in loader:
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()


def test_torch_loop_is_split_into_phases_and_patches_are_removed(tmp_path: Path) -> None:
    lines: list[str] = []
    with Session(
        tmp_path,
        readers=[FixedReader()],
        instrument_torch=True,
        log_every_steps=10,
        progress_sink=lines.append,
    ) as doc:
        _train(40, dtype=torch.float64)
        torch.save({"a": 1}, tmp_path / "ck.pt")
    rec = doc.record
    assert rec is not None and len(rec.steps) == 40
    step = rec.steps[5]
    assert step.boundary == "optimizer" and step.batch_size == 8
    assert {"data_wait", "forward", "backward", "optimizer"} <= set(step.phase_ns)
    assert rec.loaders[0].num_workers == 0 and rec.loaders[0].batch_size == 8
    assert rec.models[0].class_name == "Sequential"
    assert rec.models[0].param_dtypes == ("torch.float64",)
    assert "torch.float64" in rec.batch_dtypes
    assert rec.env and rec.system
    assert len(lines) == 4 and lines[0].startswith("ETL: ") and "iteration 9;" in lines[0]
    loaded = load_run(tmp_path)
    assert loaded.steps == rec.steps  # the file holds what memory holds
    # The session measures its own monitor thread's CPU and the report shows it.
    assert rec.end is not None and rec.end.monitor_cpu_ns is not None
    assert rec.end.monitor_cpu_ns > 0 and loaded.end == rec.end
    share = build_report(rec).summary.monitor_cpu_share
    assert share is not None and 0 < share < 1


def test_explicit_api_without_torch_and_a_failing_reader(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with Session(tmp_path, readers=[BrokenReader(), FixedReader()], instrument_torch=False) as doc:
        for batch in doc.loader(range(5)):
            with doc.phase("h2d"):
                pass
            doc.step(batch_size=batch + 1)
        time.sleep(0.25)
    rec = doc.record
    assert rec is not None
    assert [s.batch_size for s in rec.steps] == [1, 2, 3, 4, 5]
    assert "h2d" in rec.steps[0].phase_ns
    assert load_run(tmp_path).steps == rec.steps  # kept as the record's rows, made again
    assert [n.message for n in rec.notices] == [
        "reader 'broken' failed and was switched off: OSError('sensor gone')"
    ]
    assert rec.system  # the other reader carried on
    assert sum("sensor gone" in r.message for r in caplog.records) == 1


def test_one_session_at_a_time_and_watch_joins_it(tmp_path: Path) -> None:
    with Session(tmp_path / "a", readers=[], instrument_torch=False) as outer:
        with pytest.raises(UsageError, match="already active"):
            Session(tmp_path / "b", readers=[]).start()
        with watch() as inner:
            assert inner is outer


def test_watch_prints_report_and_writes_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    @watch(tmp_path / "run", json_path=tmp_path / "r.json", readers=[FixedReader()])
    def job() -> None:
        _train(20)

    job()
    err = capsys.readouterr().err
    assert "recording to" in err and "Where a step's time goes" in err
    assert (tmp_path / "r.json").exists()


def test_exception_in_job_is_recorded_and_propagates(tmp_path: Path) -> None:
    with (
        pytest.raises(RuntimeError, match="job failed"),
        Session(tmp_path, readers=[], instrument_torch=False) as doc,
    ):
        doc.step(1)
        raise RuntimeError("job failed")
    rec = load_run(tmp_path)
    assert rec.end is not None and rec.end.status == "exception"
    assert rec.end.error == "RuntimeError: job failed"


KILLED = """
import sys, time
from stepdoctor.collect import Session
from stepdoctor.collect.reduce.monitor import MONITOR_NICE
s = Session(sys.argv[1], instrument_torch=False).start()
t0 = time.monotonic()
i = 0
while True:
    s.step(4); i += 1
    time.sleep(0.002)
    if time.monotonic() - t0 > 1.5 and i % 50 == 0:
        print(i, flush=True)
"""


def test_sigkill_leaves_a_record_that_loads(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    with proc.stdout:
        line = proc.stdout.readline()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    steps_seen = int(line)
    rec = load_run(tmp_path)
    assert any("no end line" in w for w in rec.warnings)
    # At least what was flushed a second before the kill: steps take >= 2 ms each.
    assert len(rec.steps) >= steps_seen - 500
    assert rec.system


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a per-thread nice is Linux's")
def test_the_monitor_thread_runs_at_the_lowest_priority_and_the_job_keeps_its_own(
    tmp_path: Path,
) -> None:
    mine = os.getpriority(os.PRIO_PROCESS, 0)  # on Linux: this thread's
    session = Session(tmp_path / "run", instrument_torch=False, readers=[])
    with session:
        thread = session._monitor._thread  # type: ignore[union-attr]
        assert thread.native_id is not None
        for _ in range(200):  # the thread lowers itself as it starts
            if os.getpriority(os.PRIO_PROCESS, thread.native_id) == MONITOR_NICE:
                break
            time.sleep(0.01)
        assert os.getpriority(os.PRIO_PROCESS, thread.native_id) == MONITOR_NICE
        session.step(batch_size=1)
    assert os.getpriority(os.PRIO_PROCESS, 0) == mine


@pytest.mark.skipif(not ProcFs.available(), reason="snapshots on a thread read /proc")
def test_a_sampler_thread_samples_the_monitor_wakes_to_flush_and_both_end(tmp_path: Path) -> None:
    session = Session(tmp_path / "run", instrument_torch=False)
    with session:
        monitor = session._monitor
        assert monitor is not None
        (reader,) = monitor._readers
        assert isinstance(reader, PsutilReader) and reader.self_timed
        assert monitor._interval_s == FLUSH_EVERY_S  # no 10 Hz wake-ups of its own
        for _ in range(40):
            session.step(batch_size=1)
            time.sleep(0.01)
        assert reader.cpu_ns == 0  # still running
    rec = load_run(tmp_path / "run")
    assert len(rec.system) >= 3  # 10 Hz snapshots over >= 0.4 s
    times = [s.t_ns for s in rec.system]
    assert times == sorted(times) and rec.steps[0].start_ns < times[-1] <= rec.end.t_ns
    assert 0 < reader.cpu_ns <= rec.end.monitor_cpu_ns  # stopped, and counted


def _caught_up(doc: Session, steps: int) -> None:
    """Wait until the monitor has reduced ``steps`` steps (slow under coverage's tracing),
    and a flush more."""
    deadline = time.monotonic() + 60
    while doc._monitor.collected.step_count < steps and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(2 * FLUSH_EVERY_S)


@pytest.mark.parametrize("pure_python", ["0", "1"], ids=["c", "python"])
def test_a_run_keeps_its_steps_as_rows_not_objects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pure_python: str
) -> None:
    # A StepTiming with its dicts and ints took ~500 bytes; kept as its record row ~150.
    monkeypatch.setenv(PURE_PYTHON_ENV, pure_python)
    n = 20_000
    tracemalloc.start()
    try:
        with Session(tmp_path, readers=[], instrument_torch=False, log_every_steps=500) as doc:
            for _ in range(100):  # the session's own one-off allocations
                with doc.phase("forward"):
                    pass
                doc.step(batch_size=32)
            _caught_up(doc, 100)
            before = tracemalloc.take_snapshot()
            for _ in range(n):
                with doc.phase("forward"):
                    pass
                with doc.phase("backward"):
                    pass
                doc.step(batch_size=32)
            _caught_up(doc, n + 100)  # all reduced, written and logged
            after = tracemalloc.take_snapshot()
            rows = doc._monitor.collected.step_rows
    finally:
        tracemalloc.stop()
    # what stepdoctor's code allocated and still holds (other tests' threads left out)
    ours = [tracemalloc.Filter(True, "*stepdoctor*")]
    diff = after.filter_traces(ours).compare_to(before.filter_traces(ours), "filename")
    kept = sum(stat.size_diff for stat in diff)
    assert sum(map(len, rows)) / n < 120  # the rows themselves
    assert kept / n < 200, f"{kept / n:.0f} bytes kept a step"
    assert doc.record is not None and len(doc.record.steps) == n + 100
