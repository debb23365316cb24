"""The py-spy fallback: its raw output read into frames, stacks and samples (one per count,
the job's process told from its children), a run under ``--stacks py-spy`` naming the planted
function, and a clear reason when py-spy cannot run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from stepdoctor.collect.sampling import pyspy
from stepdoctor.collect.sampling.pyspy import PySpyRecorder, parse_raw, pyspy_missing
from stepdoctor.model import UNPHASED
from stepdoctor.record import load_run

#: Sampled stacks of a real run: make test runs these beside no other test (pyproject's marks).
pytestmark = pytest.mark.serial

RAW = (
    'process 41:"python train.py";<module> (/job/train.py:9);decode (/job/train.py:3) 7\n'
    'process 41:"python train.py";<module> (/job/train.py:9) 2\n'
    'process 52:"python -c worker";loop (/usr/lib/python3.11/x.py:5) 1\n'
    "garbage line without a count\n"
)


def test_raw_output_becomes_unphased_samples_per_process() -> None:
    frames, stacks, samples = parse_raw(RAW, main_pid=41)
    assert [f.function for f in frames] == ["<module>", "decode", "loop"]
    assert frames[1].file == "/job/train.py" and frames[1].line == 3 and frames[1].user
    assert not frames[2].user  # the standard library
    assert len(stacks) == 3 and len(samples) == 10
    assert {s.phase for s in samples} == {UNPHASED}
    assert sorted({s.process for s in samples}) == [0, 52]


def test_a_missing_py_spy_is_said_in_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(pyspy, "_executable", lambda: None)
    assert pyspy_missing() == "py-spy is not installed (pip install 'stepdoctor[pyspy]')"
    assert PySpyRecorder(tmp_path, 1).start() == pyspy_missing()
    assert PySpyRecorder(tmp_path, 1).stop()[3] == "py-spy was not running"


@pytest.mark.skipif(pyspy_missing() is not None, reason=str(pyspy_missing()))
def test_a_run_under_py_spy_names_the_planted_function(tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    script.write_text(
        "import time\n"
        "def planted():\n"
        "    return sum(i * i for i in range(20000))\n"
        "end = time.monotonic() + 1.5\n"
        "while time.monotonic() < end:\n"
        "    planted()\n"
    )
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "stepdoctor", "run", "--stacks", "py-spy", "--no-report",
         "--out", str(out), str(script)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = load_run(out)
    if not record.samples:  # no ptrace permission here: the run says so and goes on
        assert any("no stacks sampled" in n.message for n in record.notices), record.notices
        pytest.skip("py-spy could not attach here: " + record.notices[-1].message)
    frames = {f.id: f for f in record.frames}
    stacks = {s.id: s for s in record.stacks}
    names = {s: {frames[i].function for i in stacks[s].frames} for s in stacks}
    on_planted = [s for s in record.samples if "planted" in names[s.stack]]
    assert len(on_planted) / len(record.samples) > 0.5
