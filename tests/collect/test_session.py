"""Session end to end in-process: hot-path API, torch patches, readers, record, failures."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("torch")

import torch

from stepdoctor import build_report, watch
from stepdoctor.collect import Session
from stepdoctor.collect.reduce.monitor import MONITOR_NICE
from stepdoctor.collect.sampling.procfs import ProcFs
from stepdoctor.collect.sampling.readers import PsutilReader
from stepdoctor.collect.session import FLUSH_EVERY_S
from stepdoctor.errors import UsageError
from stepdoctor.model import GpuSample, StepTiming, SystemSample
from stepdoctor.native import PURE_PYTHON_ENV
from stepdoctor.record import load_run
from stepdoctor.record.rows import steps_from_rows

#: How long a test waits for the monitor thread to reach a state before it fails: a hang's
#: limit, not a bound on speed (the monitor runs at nice 19 and a busy machine starves it).
WAIT_LIMIT_S = 120


def _wait_for(condition: Callable[[], object], what: str, pulse: Callable[[], None]) -> None:
    """Call ``pulse`` (a step of the job, a short sleep) until ``condition()`` holds."""
    deadline = time.monotonic() + WAIT_LIMIT_S
    while not condition():
        assert time.monotonic() < deadline, f"waited {WAIT_LIMIT_S} s for {what}"
        pulse()


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


def test_flushing_and_copying_a_saved_file_is_checkpoint_time(tmp_path: Path) -> None:
    """fsync after torch.save, and the copy to other storage, are the checkpoint's time: a
    step that made them (with no torch.save) has a checkpoint phase, the others none."""
    import os
    import shutil

    original_fsync, original_copyfile = os.fsync, shutil.copyfile
    data = torch.utils.data.TensorDataset(torch.randn(96, 4), torch.randn(96, 1))
    loader = torch.utils.data.DataLoader(data, batch_size=8)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    saved = tmp_path / "weights.bin"
    saved.write_bytes(b"w" * 4096)
    with Session(tmp_path / "run", readers=[FixedReader()], instrument_torch=True) as doc:
        assert os.fsync is not original_fsync  # patched while the session runs
        for i, (x, y) in enumerate(loader):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            if i % 4 == 3:
                with saved.open("ab") as f:
                    f.write(b"x")
                    f.flush()
                    os.fsync(f.fileno())
                shutil.copy(saved, tmp_path / "copy.bin")
    assert os.fsync is original_fsync and shutil.copyfile is original_copyfile
    rec = doc.record
    assert rec is not None
    # The save after step i is timed in step i + 1 (the step ends at the optimizer).
    with_save = {s.index for s in rec.steps if s.phase("checkpoint")}
    assert with_save == {i + 1 for i in range(3, len(rec.steps) - 1, 4)}


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
s = Session(sys.argv[1], instrument_torch=False).start()
got = s._monitor.collected

def step_until(done):
    while not done():
        s.step(4)
        time.sleep(0.002)

step_until(lambda: got.step_count >= 200 and got.system)
flushed = got.step_count
# the monitor flushes in turn: once a later flush has reduced steps, this one was written
step_until(lambda: got.step_count > flushed)
print(flushed, flush=True)
step_until(lambda: False)
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
    flushed = int(line)
    rec = load_run(tmp_path)
    assert any("no end line" in w for w in rec.warnings)
    assert len(rec.steps) >= flushed  # every step of every flush before the kill
    assert rec.system
    assert [s.index for s in rec.steps] == list(range(len(rec.steps)))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a per-thread nice is Linux's")
def test_the_monitor_thread_runs_at_the_lowest_priority_and_the_job_keeps_its_own(
    tmp_path: Path,
) -> None:
    mine = os.getpriority(os.PRIO_PROCESS, 0)  # on Linux: this thread's
    session = Session(tmp_path / "run", instrument_torch=False, readers=[])
    with session:
        thread = session._monitor._thread  # type: ignore[union-attr]
        assert thread.native_id is not None
        native_id = thread.native_id
        _wait_for(  # the thread lowers itself as it starts
            lambda: os.getpriority(os.PRIO_PROCESS, native_id) == MONITOR_NICE,
            "the monitor thread to lower its priority",
            lambda: time.sleep(0.01),
        )
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

        def step() -> None:
            session.step(batch_size=1)
            time.sleep(0.01)

        # the sampler's snapshots reach the record at the monitor's flushes
        _wait_for(lambda: len(monitor.collected.system) >= 3, "three snapshots", step)
        assert reader.cpu_ns == 0  # still running
    rec = load_run(tmp_path / "run")
    assert len(rec.system) >= 3
    times = [s.t_ns for s in rec.system]
    assert times == sorted(times) and rec.steps[0].start_ns < times[-1] <= rec.end.t_ns
    assert 0 < reader.cpu_ns <= rec.end.monitor_cpu_ns  # stopped, and counted


def _step_timings_alive() -> int:
    gc.collect()  # earlier tests' records, unreachable, are not "alive"
    return sum(type(o) is StepTiming for o in gc.get_objects())


@pytest.mark.parametrize("pure_python", ["0", "1"], ids=["c", "python"])
def test_a_run_keeps_its_steps_as_rows_not_objects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pure_python: str
) -> None:
    # A StepTiming with its dicts took ~500 bytes, its record row ~110: while the job runs the
    # steps live only as rows (bytes), made into objects once, at the end. The bytes a step
    # costs are a figure: benchmarks/step_memory.py.
    monkeypatch.setenv(PURE_PYTHON_ENV, pure_python)
    n = 3_000
    alive = _step_timings_alive()
    with Session(tmp_path, readers=[], instrument_torch=False, log_every_steps=500) as doc:
        monitor = doc._monitor
        assert monitor is not None
        for _ in range(n):
            with doc.phase("forward"):
                pass
            with doc.phase("backward"):
                pass
            doc.step(batch_size=32)
        collected = monitor.collected
        _wait_for(lambda: collected.step_count == n, f"{n} steps reduced", lambda: time.sleep(0.05))
        assert _step_timings_alive() <= alive  # every step reduced, none kept as an object
        rows = list(collected.step_rows)
        assert rows and all(type(chunk) is bytes for chunk in rows)
    assert doc.record is not None
    assert steps_from_rows(rows) == list(doc.record.steps)  # the rows are the steps
    assert len(doc.record.steps) == n
    assert all({"forward", "backward"} <= set(s.phase_ns) for s in doc.record.steps)
