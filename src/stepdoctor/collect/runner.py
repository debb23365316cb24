"""Run a script as ``__main__`` under a session, the way ``python -m cProfile`` does."""

from __future__ import annotations

import importlib.util
import os
import runpy
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

from stepdoctor.collect.hooks.session import end_status, raised_at
from stepdoctor.errors import ScriptNotFoundError

__all__ = ["ScriptResult", "check_module", "import_torch_if_available", "run_module", "run_script"]


class ScriptResult:
    """How the script ended: its exit code and (status, error, where) for the record."""

    def __init__(self, status: str, exit_code: int, error: str, error_at: str = "") -> None:
        self.status = status
        self.exit_code = exit_code
        self.error = error
        self.error_at = error_at


def import_torch_if_available() -> bool:
    """Import torch (so it can be patched before the script runs); False if not installed."""
    if importlib.util.find_spec("torch") is None:
        return False
    import torch  # noqa: F401

    return True


def check_script(script: Path) -> Path:
    """Return the script's absolute path, or raise ``ScriptNotFoundError``."""
    if not script.is_file():
        raise ScriptNotFoundError(f"no such script: {script} (give the path of a Python file)")
    return script.resolve()


def check_module(module: str) -> str:
    """Return ``module`` if it can be run as ``python -m`` would (from the working folder
    first), or raise ``ScriptNotFoundError``."""
    added = _cwd_first()
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError) as exc:
        raise ScriptNotFoundError(f"no module named {module!r} ({exc})") from exc
    finally:
        if added:
            sys.path.pop(0)
    if spec is None:
        raise ScriptNotFoundError(f"no module named {module!r} (give a module python -m can run)")
    return module


def _cwd_first() -> bool:
    """Put the working folder first on ``sys.path``, as ``python -m`` does; True if added."""
    if sys.path and sys.path[0] in ("", os.getcwd()):
        return False
    sys.path.insert(0, os.getcwd())
    return True


def run_script(script: Path, args: list[str]) -> ScriptResult:
    """Run ``script`` with ``args`` as ``__main__``; return how it ended.

    ``sys.argv`` is ``[script, *args]`` and ``sys.path[0]`` the script's folder while it runs.
    An uncaught exception's traceback is printed to stderr, as Python would, and gives exit
    code 1; ``sys.exit(n)`` gives ``n``; Ctrl-C gives 130.
    """
    path = check_script(script)
    saved_argv, saved_path0 = sys.argv[:], sys.path[0] if sys.path else None
    sys.argv = [str(script), *args]
    if sys.path:
        sys.path[0] = str(path.parent)
    else:
        sys.path.append(str(path.parent))
    try:
        return _ran(lambda: runpy.run_path(str(path), run_name="__main__"), str(path))
    finally:
        sys.argv = saved_argv
        if saved_path0 is not None:
            sys.path[0] = saved_path0


def run_module(module: str, args: list[str]) -> ScriptResult:
    """Run ``module`` with ``args`` as ``python -m module args`` would: as ``__main__``, the
    working folder first on ``sys.path``, ``sys.argv[0]`` the module's file; return how it
    ended (``run_script``'s rules)."""
    check_module(module)
    saved_argv = sys.argv[:]
    sys.argv = [module, *args]
    added = _cwd_first()
    try:
        spec = importlib.util.find_spec(module)
        origin = spec.origin if spec is not None and spec.origin else ""
        if spec is not None and spec.submodule_search_locations is not None:  # a package
            main = importlib.util.find_spec(f"{module}.__main__")
            origin = main.origin if main is not None and main.origin else origin
        return _ran(lambda: runpy.run_module(module, run_name="__main__", alter_sys=True), origin)
    finally:
        sys.argv = saved_argv
        if added and sys.path and sys.path[0] == os.getcwd():
            sys.path.pop(0)


def _ran(call: Callable[[], object], path: str) -> ScriptResult:
    """Call ``call`` (the job's code, from ``path``); how it ended."""
    try:
        call()
    except BaseException as exc:
        status, code, error = end_status(exc)
        if status == "stopped":  # a tuning run's step limit: not the job's failure
            return ScriptResult(status, code, error)
        if not isinstance(exc, SystemExit):
            tb = exc.__traceback__
            while tb is not None and tb.tb_frame.f_code.co_filename != path:
                tb = tb.tb_next
            traceback.print_exception(type(exc), exc, tb or exc.__traceback__)
        elif error:
            print(error, file=sys.stderr)
        return ScriptResult(status, code, error, raised_at(exc))
    return ScriptResult("ok", 0, "")
