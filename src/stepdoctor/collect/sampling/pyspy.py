"""The fallback stack sampler: ``py-spy record`` on the job's process and its children.

py-spy reads the stacks from outside, without the GIL (``--nonblocking``: the job is never
paused), so it sees a thread inside C code that holds the GIL as it is. It needs ptrace
permission on the job, and it cannot tell which phase of a step a sample fell in: its samples
are counted per stack for the whole run (``UNPHASED``), so findings do not show ``where`` and
the flame graph and speedscope export have one profile. ``stepdoctor run --stacks py-spy``
uses it; the in-process sampler (``stacks.py``) is the default (docs/stacks.md compares them).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path

import psutil

from stepdoctor.model import UNPHASED, CodeFrame, CodeStack, StackSample

__all__ = ["RATE_HZ", "PySpyRecorder", "parse_raw", "pyspy_missing"]

#: py-spy's own default rate.
RATE_HZ = 100
#: How long py-spy may take to write its file once told to stop.
STOP_TIMEOUT_S = 20.0

_FRAME = re.compile(r"^(?P<function>.*) \((?P<file>.*):(?P<line>\d+)\)$")
_PROCESS = re.compile(r"^process (?P<pid>\d+):")


def _executable() -> str | None:
    scripts = sysconfig.get_paths().get("scripts", "")
    beside = os.path.join(scripts, "py-spy")
    return beside if os.access(beside, os.X_OK) else shutil.which("py-spy")


def pyspy_missing() -> str | None:
    """Why py-spy cannot run here (None: it can, as far as can be told before trying)."""
    if not sys.platform.startswith(("linux", "darwin", "win")):
        return f"py-spy does not run on {sys.platform}"
    if _executable() is None:
        return "py-spy is not installed (pip install 'stepdoctor[pyspy]')"
    return None


class PySpyRecorder:
    """Record the stacks of ``pid`` and its children with py-spy until ``stop``.

    Args:
        out_dir: where its raw output (and its messages) go.
        pid: the process to spy on (the job's own: py-spy runs as its child).
        popen: ``subprocess.Popen`` (a seam for tests).
    """

    def __init__(
        self,
        out_dir: Path,
        pid: int,
        *,
        rate_hz: int = RATE_HZ,
        popen: Callable[..., subprocess.Popen[bytes]] = subprocess.Popen,
    ) -> None:
        self.path = out_dir / "py-spy.txt"
        self._log = out_dir / "py-spy.log"
        self._pid = pid
        self._rate = rate_hz
        self._popen = popen
        self._proc: subprocess.Popen[bytes] | None = None
        self.cpu_ns = 0
        """py-spy's CPU time until it was told to stop."""

    def start(self) -> str | None:
        """Start py-spy; return why it could not start (None: it runs)."""
        missing = pyspy_missing()
        if missing is not None:
            return missing
        exe = _executable()
        assert exe is not None  # pyspy_missing said so
        args = [exe, "record", "--nonblocking", "--subprocesses", "--full-filenames",
                "--format", "raw", "--rate", str(self._rate), "--pid", str(self._pid),
                "--output", str(self.path)]  # fmt: skip
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self._log, "wb") as log:
            try:
                self._proc = self._popen(args, stdout=log, stderr=subprocess.STDOUT)
            except OSError as exc:
                return f"py-spy could not start: {exc}"
        return None

    def stop(self) -> tuple[list[CodeFrame], list[CodeStack], list[StackSample], str | None]:
        """Stop py-spy (it writes its file on SIGINT) and read what it recorded; the last item
        says why nothing was (None: it recorded)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return [], [], [], "py-spy was not running"
        with contextlib.suppress(psutil.Error):
            times = psutil.Process(proc.pid).cpu_times()
            self.cpu_ns = int((times.user + times.system) * 1e9)
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if not self.path.exists():
            said = self._log.read_text(errors="replace").strip().splitlines()
            reason = said[-1] if said else f"it exited with code {proc.returncode}"
            return [], [], [], f"py-spy recorded nothing: {reason}"
        frames, stacks, samples = parse_raw(self.path.read_text(errors="replace"), self._pid)
        return frames, stacks, samples, None


def parse_raw(
    text: str, main_pid: int | None = None
) -> tuple[list[CodeFrame], list[CodeStack], list[StackSample]]:
    """py-spy's ``raw`` output (collapsed stacks: ``frame;frame;... count``, a frame being
    ``function (file:line)``, a process's own stacks under ``process PID:"command"``) as
    frames, stacks and one ``UNPHASED`` sample per count, at time 0 (py-spy keeps no times).
    A line that does not parse is skipped."""
    frame_ids: dict[tuple[str, str, int], int] = {}
    frames: list[CodeFrame] = []
    stack_ids: dict[tuple[int, ...], int] = {}
    stacks: list[CodeStack] = []
    samples: list[StackSample] = []
    for line in text.splitlines():
        head, _, count = line.rpartition(" ")
        if not head or not count.isdigit():
            continue
        parts = head.split(";")
        process = 0
        found = _PROCESS.match(parts[0])
        if found is not None:
            pid = int(found["pid"])
            process = 0 if main_pid is None or pid == main_pid else pid
            parts = parts[1:]
        ids = []
        for part in parts:
            m = _FRAME.match(part)
            function, file, at = (m["function"], m["file"], int(m["line"])) if m else (part, "", 0)
            key = (function, file, at)
            if key not in frame_ids:
                frame_ids[key] = len(frames)
                user = (
                    bool(file)
                    and not file.startswith("<")  # <frozen importlib._bootstrap>
                    and "site-packages" not in file
                    and "/lib/python" not in file
                )
                frames.append(CodeFrame(id=len(frames), function=function, file=file, line=at,
                                        user=user))  # fmt: skip
            ids.append(frame_ids[key])
        if not ids:
            continue
        stack = tuple(ids)
        if stack not in stack_ids:
            stack_ids[stack] = len(stacks)
            stacks.append(CodeStack(id=len(stacks), frames=stack))
        samples.extend(
            StackSample(t_ns=0, stack=stack_ids[stack], phase=UNPHASED, process=process)
            for _ in range(int(count))
        )
    return frames, stacks, samples
