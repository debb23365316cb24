"""A job watched end to end without torch, under ``stepdoctor run``: with the C parts (where
built; ``STEPDOCTOR_REQUIRE_C_PARTS=1`` says they must be) and with their Python twins
(``STEPDOCTOR_PURE_PYTHON=1``). ``make test-pythons`` runs it on every supported CPython,
where the C parts are built against that interpreter's headers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stepdoctor.record import load_run

#: The job: a loader whose batches take ~4 ms to make (a sleep: the wait is the loader's),
#: a ~2 ms compute phase, ``doc.step()``; it prints which C parts its process has loaded, and
#: whether torch was imported.
JOB = """
import sys, time
import stepdoctor
from stepdoctor.collect.hooks.events import native_hooks
from stepdoctor.collect.reduce.reducers import native_reducer
from stepdoctor.collect.sampling.sampler import native_sampler
from stepdoctor.collect.sampling.stacks import frame_walker
from stepdoctor.logs.feed import fast_path
from stepdoctor.traces.loader import native_scanner

STEPS = int(sys.argv[1])

def batches():
    for i in range(STEPS):
        time.sleep(0.004)
        yield list(range(32))

def compute(batch):
    end = time.perf_counter() + 0.002
    while time.perf_counter() < end:
        sum(batch)

with stepdoctor.watch(report=False) as doc:
    for batch in doc.loader(batches()):
        with doc.phase("forward"):
            compute(batch)
        doc.step(batch_size=len(batch))
parts = {
    "hooks": native_hooks(), "reducer": native_reducer(), "sampler": native_sampler(),
    "trace scanner": native_scanner(), "gc log scanner": fast_path(), "frames": frame_walker(),
}
print("c parts:", ",".join(sorted(name for name, part in parts.items() if part is not None)))
print("steps:", STEPS)
print("torch imported:", "torch" in sys.modules)
"""
#: The C parts used wherever they are built (``frames`` exists for CPython 3.11-3.13 only).
TWINNED = {"gc log scanner", "hooks", "reducer", "sampler", "trace scanner"}
STEPS = 60
REQUIRED = os.environ.get("STEPDOCTOR_REQUIRE_C_PARTS", "") == "1"


def printed_by_job(stdout: str) -> tuple[set[str], int]:
    """The C parts the job said its process loaded, and the steps it said it made."""
    printed = dict(line.split(": ", 1) for line in stdout.splitlines() if ": " in line)
    return set(filter(None, printed["c parts"].split(","))), int(printed["steps"])


@pytest.mark.parametrize("pure", [False, True], ids=["c-parts", "pure-python"])
def test_a_job_without_torch_is_watched_and_diagnosed(tmp_path: Path, pure: bool) -> None:
    script = tmp_path / "job.py"
    script.write_text(JOB)
    out, run_dir = tmp_path / "report.json", tmp_path / "run"
    env = {**os.environ, "STEPDOCTOR_PURE_PYTHON": "1" if pure else "0"}
    proc = subprocess.run(
        [sys.executable, "-m", "stepdoctor", "run", "--no-report", "--json", str(out)]
        + ["--out", str(run_dir), str(script), str(STEPS)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    parts, steps_said = printed_by_job(proc.stdout)
    if pure:
        assert parts <= {"frames"}  # the frame walk is a safety fix, not a twin: kept
    elif REQUIRED:
        assert parts >= TWINNED, f"C parts not built for {sys.version}: {TWINNED - parts}"
    if not pure and REQUIRED and sys.version_info >= (3, 11):
        assert "frames" in parts

    # torch (installed or not) is patched when a job imports it: this one never pays its import
    assert "torch imported: False" in proc.stdout

    report = json.loads(out.read_text())
    summary = report["summary"]
    assert summary["steps"] == steps_said == STEPS
    assert summary["samples_per_sec"] > 0
    assert summary["phase_share"]["data_wait"] > 0 and summary["phase_share"]["forward"] > 0
    steps = load_run(run_dir).steps
    assert len(steps) == STEPS
    assert all(sum(s.phase_ns.values()) == s.wall_ns for s in steps)


#: A process that spins until it is killed; its last argument is what the report must show.
SPIN = "while True: pass"


@pytest.mark.serial  # its planted process loads a core: beside no other test
def test_a_process_competing_with_a_short_job_is_named_by_pid_and_command(
    tmp_path: Path,
) -> None:
    """A job of ~3 s (shorter than the listing's period) beside a busy process that is not
    its own: the run's last listing names it by pid and command line, and so does the
    report where the others' share makes a finding."""
    script = tmp_path / "job.py"
    script.write_text("import time\ntime.sleep(3)\n")
    out, run_dir = tmp_path / "report.json", tmp_path / "run"
    hog = subprocess.Popen([sys.executable, "-c", SPIN, "stepdoctor-test-hog"])
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "stepdoctor", "run", "--no-report", "--json", str(out)]
            + ["--out", str(run_dir), str(script)],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        hog.kill()
        hog.wait()
    assert proc.returncode == 0, proc.stderr[-2000:]
    named = {p.pid: p for s in load_run(run_dir).system for p in s.top_others}
    assert hog.pid in named, named
    command = f"{sys.executable} -c {SPIN} stepdoctor-test-hog"
    assert named[hog.pid].command == command
    findings = json.loads(out.read_text())["findings"]
    for finding in findings:
        if finding["rule"] == "competing-processes":
            top = {e["metric"]: e["value"] for e in finding["evidence"]}["top other processes"]
            assert f"(pid {hog.pid}, " in top and command in top
