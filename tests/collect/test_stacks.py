"""The stack sampler: frames interned, samples tagged with the reducer's phase, samples that
straddle an event left out, DataLoader workers' files read back, full collections recorded
where they started; and a whole session's samples naming the function that took a phase."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import sysconfig
import threading
import time
from pathlib import Path
from types import FrameType

import pytest

from stepdoctor.collect.hooks.events import ENTER, EXIT, FWD_ENTER, FWD_EXIT, SAMPLE, fwd_arg
from stepdoctor.collect.hooks.session import library_roots
from stepdoctor.collect.reduce.reducers import native_reducer, new_reducer
from stepdoctor.collect.reduce.samples import SamplePairer
from stepdoctor.collect.sampling.sampler import native_sampler
from stepdoctor.collect.sampling.stacks import (
    FrameTable,
    Stack,
    StackSampler,
    WorkerStacks,
    _native_sleep_read,
    frame_walker,
    in_process_safe,
    python_stack,
    read_worker_stacks,
    worker_file,
)
from stepdoctor.collect.session import Session
from stepdoctor.model import GC_PHASE, SETUP_PHASE, WORKER_PHASE
from stepdoctor.record import load_run

#: Sampled stacks of real threads and processes: make test runs these beside no other test.
pytestmark = pytest.mark.serial

OWNER = 7
#: Roots as a job run from this folder sees them: "ours" is a folder no code lives in, so this
#: test file counts as the job's code and the standard library as a library.
ROOTS = ("/nonexistent-stepdoctor/", *library_roots()[1:])

REDUCERS = [pytest.param(False, id="python")] + (
    [pytest.param(True, id="c")] if native_reducer() is not None else []
)


def shown(qualname: str) -> str:
    """The name a sampled function of ``qualname`` is shown by on this Python: its qualified
    name from CPython 3.11 on (``co_qualname``), its bare name on 3.10."""
    return qualname if sys.version_info >= (3, 11) else qualname.rsplit(".", 1)[-1]


def _leaf_frame() -> FrameType:
    def inner() -> FrameType:
        return sys._getframe()

    return inner()


def _leaf() -> Stack:
    return python_stack(_leaf_frame())


def test_frames_are_interned_with_the_jobs_code_told_from_libraries() -> None:
    table = FrameTable(ROOTS)
    first = table.stack_id(_leaf())
    again = table.stack_id(_leaf())
    assert first is not None and first == again  # one stack, interned once
    frames, stacks = table.take()
    assert len(stacks) == 1 and table.take() == ([], [])
    by_id = {f.id: f for f in frames}
    names = [by_id[i].function for i in stacks[0].frames]
    assert names[-2:] == ["_leaf_frame", shown("_leaf_frame.<locals>.inner")]  # outer first
    assert by_id[stacks[0].frames[-1]].user and by_id[stacks[0].frames[-1]].file == __file__
    pytest_frames = [f for f in frames if "_pytest" in f.file]
    assert pytest_frames and not any(f.user for f in pytest_frames)  # an installed package
    assert table.line == _leaf_frame().f_lineno  # where the innermost frame of the job's was


def test_stepdoctors_own_frames_are_left_out_and_a_cut_starts_the_stack() -> None:
    here = os.path.join(os.path.dirname(__file__), "")
    table = FrameTable((here, *ROOTS[1:]))  # this folder as "ours": its frames are dropped
    assert table.stack_id(_leaf()) is not None
    frames, _ = table.take()
    assert not any(f.file.startswith(here) for f in frames)
    cut = FrameTable(ROOTS, cut_at=("_leaf_frame",))
    stack = cut.stack_id(_leaf())
    frames, stacks = cut.take()
    assert stack is not None and [frames[0].function] == [shown("_leaf_frame.<locals>.inner")]
    assert stacks[0].frames == (frames[0].id,)


def test_a_sample_marks_the_event_buffer_and_keeps_its_stack() -> None:
    marks: list[tuple[int, int]] = []
    stack = _leaf()
    sampler = StackSampler(
        thread_id=OWNER,
        table=FrameTable(ROOTS),
        mark=lambda t, i: marks.append((t, i)),
        clock=lambda: 1_000,
        read_stack={OWNER: stack}.get,
    )
    sampler.sample(waited_ns=300)
    sampler.sample()
    assert marks == [(700, 0), (1_000, 1)]  # due when the wait for the GIL began
    taken = sampler.take()
    assert [(i, t) for i, t, _, _ in taken] == [(0, 700), (1, 1_000)]
    assert taken[0][2] == taken[1][2] >= 0 and sampler.next_id == 2
    frames, stacks = sampler.take_table()
    assert frames and len(stacks) == 1


def test_a_thread_that_is_gone_is_not_sampled() -> None:
    sampler = StackSampler(thread_id=OWNER, table=FrameTable(ROOTS), mark=None,
                           read_stack=lambda thread_id: None)  # fmt: skip
    sampler.sample()
    assert sampler.take() == [] and sampler.next_id == 0


WALKER = frame_walker()
#: ``make test`` (STEPDOCTOR_REQUIRE_C_PARTS=1) on a CPython the walker is written for: built.
WALKER_REQUIRED = (
    os.environ.get("STEPDOCTOR_REQUIRE_C_PARTS", "") == "1"
    and sys.implementation.name == "cpython"
    and (3, 11) <= sys.version_info[:2] <= (3, 13)
)
needs_walker = pytest.mark.skipif(
    WALKER is None and not WALKER_REQUIRED, reason="the C frame walker (_frames) is not built"
)


def _names(stack: Stack | None) -> list[tuple[str, int]]:
    return [(code.co_qualname, line) for code, line in stack or ()]


def test_the_frame_walker_is_built_where_required() -> None:
    assert WALKER is not None or not WALKER_REQUIRED
    assert in_process_safe(WALKER) == (WALKER is not None or sys.version_info[:2] != (3, 11))


@needs_walker
def test_the_walker_reads_a_thread_as_its_frame_objects_do() -> None:
    assert WALKER is not None
    own, here = WALKER(threading.get_ident()), python_stack(sys._getframe())  # one line
    assert _names(own)[1:] == _names(here)  # [0]: the walker's own lambda
    parked = threading.Event()
    done = threading.Event()

    def park() -> None:
        parked.set()
        done.wait()

    thread = threading.Thread(target=park)
    thread.start()
    try:
        parked.wait()
        time.sleep(0.05)  # let it reach the wait (asserted below, not assumed)
        read = WALKER(thread.ident or 0)
        frame = sys._current_frames()[thread.ident or 0]
        assert _names(read) == _names(python_stack(frame))
        assert "test_the_walker_reads_a_thread_as_its_frame_objects_do.<locals>.park" in [
            name for name, _ in _names(read)
        ]
    finally:
        done.set()
        thread.join()
    assert WALKER(thread.ident or 0) is None  # gone
    assert WALKER(123456789) is None


@needs_walker
def test_the_walker_keeps_the_frames_cpythons_own_walk_keeps() -> None:
    """Collections that start inside calls being set up (a generator object being made, a
    closure's cell): the walker keeps the frames sys._getframe's f_back chain keeps (a frame
    whose first instruction has not run is left out by both)."""
    assert WALKER is not None
    seen: list[tuple[list[tuple[str, int]], list[tuple[str, int]]]] = []

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and len(seen) < 400:
            walked, framed = WALKER(threading.get_ident()), python_stack(sys._getframe())
            seen.append((_names(walked)[1:], _names(framed)))

    def numbers() -> object:
        yield 1

    def with_cell(x: int) -> object:
        return lambda: x

    threshold = gc.get_threshold()
    gc.callbacks.append(on_gc)
    gc.set_threshold(1, 0, 0)
    try:
        for i in range(200):
            numbers()
            kept = [i]
            with_cell(i)
            del kept
    finally:
        gc.set_threshold(*threshold)
        gc.callbacks.remove(on_gc)
    inside = {name for walked, _ in seen for name, _ in walked[1:2]}
    assert {n for n in inside if n.endswith((".numbers", ".with_cell"))}  # calls being made
    assert all(walked == framed for walked, framed in seen)


@needs_walker
def test_the_sampler_reads_no_frame_objects_of_another_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Walking another thread's frame objects crashes CPython 3.11 now and then (_frames.c):
    where the walker is built, the sampler never asks for them."""

    def forbidden() -> dict[int, FrameType]:
        raise AssertionError("sys._current_frames was called")

    monkeypatch.setattr(sys, "_current_frames", forbidden)
    sampler = StackSampler(thread_id=threading.get_ident(), table=FrameTable(ROOTS),
                           mark=None, interval_s=0.001)  # fmt: skip
    sampler.start()
    end = time.monotonic() + 5
    while sampler.next_id < 20 and time.monotonic() < end:
        sum(i * i for i in range(10_000))
    sampler.stop()
    assert sampler.failed is None and sampler.next_id >= 20
    _, stacks = sampler.take_table()
    assert stacks


def test_a_python_without_a_safe_walk_samples_with_py_spy(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import stepdoctor.collect.session as session_module

    monkeypatch.setattr(session_module, "in_process_safe", lambda walker: False)
    monkeypatch.setattr(session_module.PySpyRecorder, "start", lambda self: "py-spy is absent")
    with Session(tmp_path / "run") as session:
        assert session._use_pyspy and session._stacks is None
    record = load_run(tmp_path / "run")
    messages = [n.message for n in record.notices]
    assert any("not in-process" in m for m in messages), messages
    assert "no stacks sampled: py-spy is absent" in messages


@pytest.mark.parametrize("native", REDUCERS)
def test_the_reducer_tags_samples_with_the_phase_and_drops_straddling_ones(native: bool) -> None:
    reducer = new_reducer(OWNER, native=native)
    reducer.feed([
        (5, SAMPLE, 0, OWNER),                       # before the first event: set-up
        (10, ENTER, "data_wait", OWNER),
        (20, SAMPLE, 1, OWNER),                      # in the data wait
        (30, EXIT, 64, OWNER),
        (25, SAMPLE, 2, OWNER),                      # due before the exit: straddles it
        (40, FWD_ENTER, fwd_arg(1, True, True), OWNER),
        (45, SAMPLE, 3, 99),                         # from the sampler's thread: the owner's
        (50, FWD_EXIT, 1, OWNER),
        (60, SAMPLE, 4, OWNER),                      # time in no phase: other
    ])  # fmt: skip
    assert reducer.take_sample_phases() == [
        (0, SETUP_PHASE), (1, "data_wait"), (2, ""), (3, "forward"), (4, "other"),
    ]  # fmt: skip
    assert reducer.take_sample_phases() == []
    steps = reducer.finish()
    assert sum(s.phase_ns.get("data_wait", 0) for s in steps) in (0, 20)  # samples charge nothing


def test_pairs_wait_for_each_other_and_leftovers_are_settled_at_the_end() -> None:
    stack = _leaf()
    sampler = StackSampler(thread_id=OWNER, table=FrameTable(ROOTS), mark=None,
                           clock=lambda: 5, read_stack={OWNER: stack}.get)  # fmt: skip
    pairer = SamplePairer(sampler)
    sampler.sample()  # id 0
    frames, stacks, samples = pairer.collect([])  # its phase is not known yet
    assert frames and stacks and samples == []
    _, _, samples = pairer.collect([(0, "forward"), (1, "backward")])  # 1 not taken yet
    assert [(s.phase, s.stack) for s in samples] == [("forward", stacks[0].id)]
    sampler.sample()  # id 1: its phase came first
    sampler.sample()  # id 2: straddled
    sampler.sample()  # id 3: never fed to the reducer
    _, _, samples = pairer.collect([(2, "")], final=True)
    assert sorted(s.phase for s in samples) == ["backward", SETUP_PHASE]
    assert pairer.straddled == 1


def test_a_full_collection_is_recorded_where_it_started(tmp_path: Path) -> None:
    def make_garbage() -> None:
        gc.collect()  # a full collection, started here

    # few periodic samples (and a stop that waits at most one interval for the sampling thread)
    with Session(tmp_path / "run", instrument_torch=False, stack_interval_s=0.5) as session:
        make_garbage()
        make_garbage()
    record = session.stop()
    gc_samples = [s for s in record.samples if s.phase == GC_PHASE]
    assert len(gc_samples) >= 2
    frames = {f.id: f for f in record.frames}
    stacks = {s.id: s for s in record.stacks}
    leaves = {frames[stacks[s.stack].frames[-1]].function for s in gc_samples}
    assert any(name.endswith("make_garbage") for name in leaves), leaves


def _busy(until: float) -> int:
    n = 0
    while time.monotonic() < until:
        n += sum(range(200))
    return n


def test_a_session_names_the_function_that_took_a_phase(tmp_path: Path) -> None:
    with Session(tmp_path / "run", instrument_torch=False, stack_interval_s=0.005) as session:
        for _ in range(6):
            with session.phase("data_wait"):
                _busy(time.monotonic() + 0.05)
            session.step(batch_size=1)
    session.stop()
    record = load_run(tmp_path / "run")  # from the file: frames, stacks and samples written
    frames = {f.id: f for f in record.frames}
    stacks = {s.id: s for s in record.stacks}
    in_wait = [s for s in record.samples if s.phase == "data_wait"]
    assert len(in_wait) >= 10, "the sampler took too few samples in 0.3 s of data wait"
    on_busy = [
        s for s in in_wait if any(frames[i].function == "_busy" for i in stacks[s.stack].frames)
    ]
    assert len(on_busy) / len(in_wait) >= 0.9


def test_worker_files_are_read_back_renumbered_and_deleted(tmp_path: Path) -> None:
    parent = FrameTable(ROOTS)
    parent.stack_id(_leaf())
    frames, stacks = parent.take()
    worker = WorkerStacks(tmp_path, FrameTable(ROOTS), 0.01)
    stack = _leaf()
    worker._sampler._read_stack = {worker._sampler._thread_id: stack}.get
    worker._sampler.sample()
    path = worker_file(tmp_path, worker.pid)
    with open(path, "a", encoding="utf-8") as out:
        worker._write(out)
        out.write('{"frames": [[0, "cut sh')  # the worker ended mid-line
    other = worker_file(tmp_path, 424242)
    other.write_text("{}\n")
    new_frames, new_stacks, samples, bad = read_worker_stacks(
        tmp_path, frames, stacks, keep={worker.pid}
    )
    assert bad == 1 and not path.exists() and not other.exists()
    assert new_frames == [] and new_stacks == []  # the same functions and stack as the parent's
    assert [(s.phase, s.process, s.stack) for s in samples] == [
        (WORKER_PHASE, worker.pid, stacks[0].id)
    ]


SLEEP_READ = None if WALKER is None else _native_sleep_read()
needs_sleep_read = pytest.mark.skipif(
    SLEEP_READ is None and not (WALKER_REQUIRED and sys.platform.startswith("linux")),
    reason="_frames.sleep_read is not built",
)


#: Samples taken by ``sleep_read`` from a second thread while the main thread runs ``spin``
#: (bytecode only: it lets the GIL go only when asked) or ``nap`` (sleeping: the GIL let go),
#: in a process of its own (no other thread to take the GIL between them): per sample, the
#: innermost function and whether the main thread read the stack itself. Forked, the child's
#: main thread answers as its parent's (a DataLoader worker). The main thread need not be
#: the one to read a sample of ``spin``: on a busy machine it may not have taken the GIL back
#: since the sampler let it go, and the sampler takes it first (the stack is the same).
SLEEP_READ_SCRIPT = """
import json, os, sys, threading, time
from stepdoctor.collect.sampling._frames import sleep_read
def spin(stop):
    x = 0
    stop[1] = True
    while not stop[0]:
        x += 1
def nap(stop):
    stop[1] = True
    while not stop[0]:
        time.sleep(0.01)
def sampled(work, other=None, n=20, started=None, ask=None, samplers=1):
    main, stop, out = threading.get_ident(), [False, False], []
    def sampler():
        while not (started or stop)[1]:  # the sampled thread is in its work
            time.sleep(0.001)
        for _ in range(n):
            due = time.monotonic_ns() + 2_000_000
            asks = other is None if ask is None else ask
            _, _, stack, by_main = sleep_read(due, 20, other or main, 250, asks)
            out.append((stack[0][0].co_qualname if stack else "", by_main))
    threads = [threading.Thread(target=sampler) for _ in range(samplers)]
    for thread in threads:
        thread.start()
    def watch():
        for thread in threads:
            thread.join()
        stop[0] = True
    threading.Thread(target=watch).start()
    work(stop)
    return out
def other_thread(ask=None):
    stop = [False, False]
    spinner = threading.Thread(target=spin, args=(stop,))
    spinner.start()
    try:
        return sampled(nap, other=spinner.ident, n=5, started=stop, ask=ask)
    finally:
        stop[0] = True
        spinner.join()
def fork_while_sampling():
    # a child forked while a sampler waits for the GIL (the short switch interval set)
    stop = [False, False]
    def sampler():
        while not stop[0]:
            sleep_read(time.monotonic_ns() + 200_000, 20, threading.main_thread().ident, 50, True)
    thread = threading.Thread(target=sampler)
    thread.start()
    read, write = os.pipe()
    end = time.monotonic() + 0.05
    while time.monotonic() < end:
        pass
    pid = os.fork()
    if pid == 0:
        os.write(write, json.dumps(sys.getswitchinterval()).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    stop[0] = True
    thread.join()
    return json.loads(os.read(read, 1 << 10))
before = sys.getswitchinterval()
out = {"spin": sampled(spin), "nap": sampled(nap), "spin_after_nap": sampled(spin),
       "other": other_thread(), "other_asked": other_thread(ask=True),
       "two_samplers": sampled(spin, samplers=2),
       "forked_switch": fork_while_sampling(), "before": before}
out["switch_after"] = sys.getswitchinterval()
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    os.write(write, json.dumps(sampled(spin)).encode())
    os._exit(0)
os.close(write)
os.waitpid(pid, 0)
out["forked_spin"] = json.loads(os.read(read, 1 << 16))
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def sleep_read_samples() -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-c", SLEEP_READ_SCRIPT], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result: dict[str, object] = json.loads(proc.stdout)
    return result


@needs_sleep_read
def test_the_main_thread_holding_the_gil_reads_its_own_stack_when_asked(
    sleep_read_samples: dict[str, object],
) -> None:
    """A sample of a main thread that holds the GIL is read by that thread at its next
    bytecode boundary (a pending call): where it was when the sample was due."""
    _all_spin_mostly_by_main(sleep_read_samples["spin"])


def _all_spin_mostly_by_main(samples: object) -> None:
    assert isinstance(samples, list) and len(samples) == 20
    assert {name for name, _ in samples} == {"spin"}
    assert any(by_main for _, by_main in samples)


@needs_sleep_read
def test_a_main_thread_that_let_the_gil_go_is_read_by_the_sampler(
    sleep_read_samples: dict[str, object],
) -> None:
    """In code that let the GIL go (a sleep, a torch op) the main thread has not moved: the
    sampler reads it first; the call it asked for finds the sample taken and does nothing."""
    napped = sleep_read_samples["nap"]
    assert isinstance(napped, list) and {name for name, _ in napped} == {"nap"}
    assert not all(by_main for _, by_main in napped)
    _all_spin_mostly_by_main(sleep_read_samples["spin_after_nap"])  # no harm done


@needs_sleep_read
def test_another_thread_is_read_by_the_sampler_alone(
    sleep_read_samples: dict[str, object],
) -> None:
    assert sleep_read_samples["other"] == [["spin", False]] * 5
    # asked of the main thread for another thread's stack: the main thread does not answer
    assert sleep_read_samples["other_asked"] == [["spin", False]] * 5


@needs_sleep_read
def test_samplers_asking_at_once_each_get_the_stack(
    sleep_read_samples: dict[str, object],
) -> None:
    """Two samplers in one process: each gets the main thread's stack (its own request's
    reading, or its own), and the switch interval is put back once both are done."""
    both = sleep_read_samples["two_samplers"]
    assert isinstance(both, list) and len(both) == 40
    assert {name for name, _ in both} == {"spin"}
    assert sleep_read_samples["switch_after"] == sleep_read_samples["before"]


@needs_sleep_read
def test_a_child_forked_while_a_sampler_waits_has_the_switch_interval_it_had(
    sleep_read_samples: dict[str, object],
) -> None:
    assert sleep_read_samples["forked_switch"] == sleep_read_samples["before"]


@needs_sleep_read
def test_a_forked_child_reads_its_own_stack_when_asked(
    sleep_read_samples: dict[str, object],
) -> None:
    """A DataLoader worker is forked: its main thread answers the sampler as its parent's."""
    _all_spin_mostly_by_main(sleep_read_samples["forked_spin"])


@pytest.mark.skipif(native_sampler() is None, reason="the C sampler is not built")
def test_sleep_until_puts_the_switch_interval_back() -> None:
    module = native_sampler()
    before = sys.getswitchinterval()
    woke, got = module.sleep_until(time.monotonic_ns() + 1_000_000, 20)
    assert woke <= got and sys.getswitchinterval() == before
    woke, got = module.sleep_until(0)  # a deadline passed: no sleep
    assert woke <= got


@pytest.mark.skipif(native_sampler() is None, reason="the C sampler is not built")
def test_the_c_sampler_thread_survives_tracemalloc() -> None:
    """The C thread reads files without a Python thread state: its memory must not come from
    Python's raw allocator, which tracemalloc hooks (and which then takes the GIL)."""
    code = (
        "import time, tracemalloc\n"
        "from stepdoctor.collect.sampling.sampler import new_sampler\n"
        "s = new_sampler(1_000_000, native=True)\n"
        "s.set_files(['/proc/self/stat'])\n"
        "tracemalloc.start(16)\n"
        "s.start()\n"
        "end = time.monotonic() + 0.3\n"
        "while time.monotonic() < end:\n"
        "    s.take(); [dict() for _ in range(1000)]\n"
        "s.stop(); tracemalloc.stop(); print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


def test_library_roots_hold_the_command_launchers() -> None:
    assert os.path.join(sysconfig.get_paths()["scripts"], "") in library_roots()


def test_the_sampling_thread_samples_and_stops(tmp_path: Path) -> None:
    got: list[int] = []
    sampler = StackSampler(thread_id=threading.get_ident(), table=FrameTable(ROOTS),
                           mark=lambda t, i: got.append(i), interval_s=0.002)  # fmt: skip
    sampler.start()
    deadline = time.monotonic() + 30
    while len(got) < 5 and time.monotonic() < deadline:
        sum(range(1000))
    sampler.stop()
    assert len(got) >= 5 and sampler.failed is None and sampler.cpu_ns > 0
    assert json.dumps(sampler.take()[:1])
