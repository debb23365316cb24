"""The tests' zygote (``tests/_zygote.py``): a job forked from it is the process
``python -m stepdoctor`` would have been, as ``subprocess.run`` returns it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")

from tests._zygote import stepdoctor_run, zygote_environment

SCRIPT = """\
import atexit, os, sys, time
import torch
atexit.register(print, "at exit")
print("cwd", os.getcwd())
print("marker", os.environ.get("ZYGOTE_MARKER"))
print("argv", sys.argv[1:])
print("threads", torch.get_num_threads())
print("parent", os.getppid())
print("to stderr", file=sys.stderr)
if sys.argv[1:] == ["sleep"]:
    time.sleep(60)
sys.exit(int(os.environ.get("ZYGOTE_EXIT", "0")))
"""


def _job(tmp_path: Path) -> Path:
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(SCRIPT))
    return script


@pytest.mark.scenario
def test_a_forked_job_has_its_own_folder_environment_arguments_streams_and_exit_code(
    tmp_path: Path,
) -> None:
    script = _job(tmp_path)
    folder = tmp_path / "work"
    folder.mkdir()
    env = {**zygote_environment(), "ZYGOTE_MARKER": "seen", "ZYGOTE_EXIT": "3"}
    args = ["run", "--no-report", "--out", str(tmp_path / "run"), str(script), "a", "b"]
    forked = stepdoctor_run(args, env=env, timeout=120, cwd=folder)
    fresh = subprocess.run(
        [sys.executable, "-m", "stepdoctor", *args],
        capture_output=True, text=True, timeout=120, env=env, cwd=folder,
    )  # fmt: skip
    assert forked.returncode == fresh.returncode == 3, forked.stderr
    assert f"cwd {folder}" in forked.stdout
    assert "marker seen" in forked.stdout
    assert "argv ['a', 'b']" in forked.stdout
    assert forked.stdout.rstrip().endswith("at exit")
    assert "to stderr" in forked.stderr and "to stderr" not in forked.stdout
    assert f"parent {os.getpid()}" not in forked.stdout  # forked from the zygote
    assert f"parent {os.getpid()}" in fresh.stdout

    def alike(out: str) -> list[str]:
        return [line for line in out.splitlines() if not line.startswith(("threads", "parent"))]

    assert alike(forked.stdout) == alike(fresh.stdout)
    assert (tmp_path / "run" / "run.jsonl").is_file()
    again = stepdoctor_run(args[:-2], env={**env, "ZYGOTE_EXIT": "0"}, timeout=120, cwd=folder)
    assert again.returncode == 0 and "argv []" in again.stdout


@pytest.mark.scenario
def test_a_job_past_its_timeout_is_killed_and_the_next_one_runs(tmp_path: Path) -> None:
    script = _job(tmp_path)
    args = ["run", "--no-report", "--out", str(tmp_path / "run"), str(script)]
    with pytest.raises(subprocess.TimeoutExpired):
        stepdoctor_run([*args, "sleep"], env=zygote_environment(), timeout=3)
    after = stepdoctor_run(args, env=zygote_environment(), timeout=120)
    assert after.returncode == 0 and "argv []" in after.stdout, after.stderr


@pytest.mark.scenario
def test_a_job_that_sets_what_torch_reads_at_import_runs_in_a_fresh_process(
    tmp_path: Path,
) -> None:
    script = _job(tmp_path)
    args = ["run", "--no-report", "--out", str(tmp_path / "run"), str(script)]
    env = zygote_environment()
    forked = stepdoctor_run(args, env=env, timeout=120)
    assert f"parent {os.getpid()}" not in forked.stdout, forked.stdout  # the zygote's child
    threads = "7" if env.get("OMP_NUM_THREADS") != "7" else "5"
    ran = stepdoctor_run(args, env={**env, "OMP_NUM_THREADS": threads}, timeout=120)
    assert f"parent {os.getpid()}" in ran.stdout, ran.stdout  # started from this process
