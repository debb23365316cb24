"""``stepdoctor run`` for the tests' jobs (the zoo's, the frameworks', tune's, the CLI's...),
forked from a process that has already imported torch (a zygote), one per test process.

Every scenario job imports torch (~2 s on the 2-core reference machine) and builds an
optimizer, whose first construction imports ``torch._dynamo`` (another ~2 s, torch 2.13): 4 s
of a ~10 s run, paid again by each of the ~100 runs of ``make test``. The zygote pays it once:
each job is a fork of it that runs ``stepdoctor run`` as ``python -m stepdoctor run`` would
(its own arguments, environment, working folder, standard streams, exit handlers and exit
code), so the job is a process of its own as before, and only what it imports first differs;
it ends without the interpreter's teardown of its modules (another 1.4-1.8 s with torch's
compiler loaded).

What this leaves to other tests: stepdoctor's hooks meet torch already imported
(``collect/hooks/on_import.py`` calls them at once), not as the job imports it. Jobs run in
fresh processes elsewhere keep that path tested (``tests/test_watched_job.py``, the
interrupted and killed jobs of ``tests/cli/test_failed_runs.py``, the distributed ranks,
Lightning's callback without ``run`` and the ranks Lightning starts, ``stepdoctor tune``'s
batch sweep, ``make demo``, ``benchmarks/accuracy.py`` for docs/accuracy.md);
``ZOO_FRESH_PROCESS=1`` runs the zoo's jobs in fresh processes too. A job whose environment
sets what torch reads at import (threads, CPU capability) runs in a fresh process.

Run as ``python -m tests._zygote``, it is the zygote: one request per line on stdin (JSON:
``args``, ``env``, ``cwd``, ``stdout``, ``stderr``), and for each the forked job's pid, then
its exit code, on stdout.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import subprocess
import sys
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["stepdoctor_run", "stop_zygote", "zygote_environment"]

ROOT = Path(__file__).resolve().parents[1]

#: Environment variables read when torch is imported (its thread pools, its CPU kernels): a
#: job that sets one is run in a fresh process, where torch reads it.
READ_AT_TORCH_IMPORT = ("OMP_", "MKL_", "KMP_", "ATEN_", "TORCH_", "PYTORCH_", "CUDA_")

#: What the zygote imports before it forks: what a scenario job imports first (torch, and the
#: compiler that torch's optimizers import the first time one is built).
PRELOAD = ("torch", "torch._dynamo", "torch.optim", "torch.utils.data")


def stepdoctor_run(
    args: Sequence[str],
    *,
    env: Mapping[str, str],
    timeout: float,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python -m stepdoctor ARGS`` with the environment ``env`` (the whole of it), as
    ``subprocess.run(..., capture_output=True, text=True, timeout=timeout)`` would return it:
    forked from this process's zygote unless ``env`` asks for a fresh process (module doc).

    Raises:
        subprocess.TimeoutExpired: the job ran past ``timeout`` (it and its children killed).
    """
    command = [sys.executable, "-m", "stepdoctor", *args]
    folder = Path.cwd() if cwd is None else cwd
    zygote = _Zygote.get()
    if env.get("ZOO_FRESH_PROCESS") == "1" or not zygote.imports_alike(env):
        return subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, env=dict(env), cwd=folder
        )
    return zygote.run(command, dict(env), folder, timeout)


def stop_zygote() -> None:
    """Stop this test process's zygote if it runs (for a test that counts this process's
    children); the next ``stepdoctor_run`` starts another."""
    if _Zygote._one is not None:
        _Zygote._one.close()
        _Zygote._one = None


def zygote_environment() -> dict[str, str]:
    """The environment this process's zygote started with: a job given it (plus variables
    torch does not read at import) is forked, whatever this process's environment has become
    since (Lightning's launcher sets OMP_NUM_THREADS in the process that starts it); without
    ``ZOO_FRESH_PROCESS``."""
    return {k: v for k, v in _Zygote.get().env.items() if k != "ZOO_FRESH_PROCESS"}


class _Zygote:
    """The zygote process of this test process, started on first use."""

    _one: _Zygote | None = None

    def __init__(self) -> None:
        self.env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "tests._zygote"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=ROOT,
            env=self.env,
        )
        self._pending = b""
        atexit.register(self.close)

    @classmethod
    def get(cls) -> _Zygote:
        if cls._one is None or cls._one._proc.poll() is not None:
            cls._one = cls()
        return cls._one

    def imports_alike(self, env: Mapping[str, str]) -> bool:
        """Whether a job with the environment ``env`` imports torch as the zygote did: the
        variables torch reads at import are the zygote's."""
        names = {k for k in (*env, *self.env) if k.startswith(READ_AT_TORCH_IMPORT)}
        return all(env.get(k) == self.env.get(k) for k in names)

    def close(self) -> None:
        """End the zygote (its input closed, killed after 10 s), reaped, its pipes closed."""
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            with contextlib.suppress(OSError):
                self._proc.stdin.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        atexit.unregister(self.close)

    def run(
        self, command: list[str], env: dict[str, str], cwd: Path, timeout: float
    ) -> subprocess.CompletedProcess[str]:
        out, err = _scratch("out"), _scratch("err")
        request = {"args": command[3:], "env": env, "cwd": str(cwd), "stdout": out, "stderr": err}
        assert self._proc.stdin is not None
        self._proc.stdin.write(json.dumps(request).encode() + b"\n")
        self._proc.stdin.flush()
        deadline = time.monotonic() + timeout + 60  # the zygote's first start: torch's import
        pid = None
        try:
            pid = int(self._reply(deadline)["pid"])
            code = int(self._reply(time.monotonic() + timeout)["returncode"])
        except BaseException as exc:  # the replies are out of step: this zygote is done
            if pid is not None:
                _kill_tree(pid)
            self._proc.kill()
            self.close()  # reaped: no zombie child left to this process
            _Zygote._one = None
            output = _read(out), _read(err)  # (and the files removed)
            if isinstance(exc, TimeoutError):
                raise subprocess.TimeoutExpired(command, timeout, *output) from None
            raise
        return subprocess.CompletedProcess(command, code, _read(out), _read(err))

    def _reply(self, deadline: float) -> dict[str, int]:
        assert self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        while b"\n" not in self._pending:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError("the zygote's job did not answer in time")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise RuntimeError(f"the zygote exited (code {self._proc.wait()})")
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        reply: dict[str, int] = json.loads(line)
        return reply


def _scratch(kind: str) -> str:
    import tempfile

    fd, path = tempfile.mkstemp(prefix=f"stepdoctor-zygote-{kind}-")
    os.close(fd)
    return path


def _read(path: str) -> str:
    try:
        return Path(path).read_text(errors="replace")
    finally:
        Path(path).unlink(missing_ok=True)


def _kill_tree(pid: int) -> None:
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [*root.children(recursive=True), root]
    except psutil.NoSuchProcess:
        return
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()


def _serve() -> None:
    """The zygote: import what the jobs import, then fork a job per request."""
    import importlib

    replies = os.dup(1)
    os.dup2(2, 1)  # what else is printed here goes to stderr, not into the replies
    for name in PRELOAD:
        importlib.import_module(name)
    import torch

    torch.optim.SGD([torch.zeros(1, requires_grad=True)])  # its first build's lazy imports
    requests = sys.stdin.buffer
    while line := requests.readline():
        request = json.loads(line)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(replies)
                _become_the_job(request)  # ends the child with the job's exit code
            except BaseException:  # before the job started: never back into this loop
                traceback.print_exc()
            os._exit(1)
        os.write(replies, json.dumps({"pid": pid}).encode() + b"\n")
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        os.write(replies, json.dumps({"returncode": code}).encode() + b"\n")


def _become_the_job(request: dict[str, object]) -> None:
    """In the forked child: the process ``python -m stepdoctor ARGS`` would have been (its
    streams, folder, environment, ``sys.argv``, the folder it was started from first on
    ``sys.path``); then stepdoctor's command line, whose exit code ends it
    (``end_without_teardown``)."""
    for fd, path, flags in (
        (0, os.devnull, os.O_RDONLY),
        (1, request["stdout"], os.O_WRONLY | os.O_TRUNC),
        (2, request["stderr"], os.O_WRONLY | os.O_TRUNC),
    ):
        opened = os.open(str(path), flags)
        os.dup2(opened, fd)
        os.close(opened)
    sys.stdin = open(os.devnull)  # noqa: SIM115 (the job's stdin, for its life)
    cwd = str(request["cwd"])
    os.chdir(cwd)
    env = request["env"]
    assert isinstance(env, dict)
    os.environ.clear()
    os.environ.update(env)
    args = request["args"]
    assert isinstance(args, list)
    import stepdoctor.__main__ as entry

    sys.argv = [str(entry.__file__), *args]
    sys.path[0] = cwd
    import warnings

    # the warning filters a fresh interpreter would start with: the zygote's (Python's
    # defaults), then the job's PYTHONWARNINGS, applied as the interpreter applies them
    warnings._processoptions([o for o in str(env.get("PYTHONWARNINGS", "")).split(",") if o])  # type: ignore[attr-defined]
    from stepdoctor.cli import main

    code = 1
    try:
        code = main(args)
    except SystemExit as exc:  # as the interpreter reads it
        code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    from stepdoctor.cli._exit import end_without_teardown

    # as python -m stepdoctor ends, less its teardown of the modules (1.4-1.8 s after torch and
    # its compiler are imported; by then the job's record and report are written)
    end_without_teardown(code)


if __name__ == "__main__":
    _serve()
