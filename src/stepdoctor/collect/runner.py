"""Run a script as ``__main__`` under a session, the way ``python -m cProfile`` does."""

from __future__ import annotations

import importlib.util
import runpy
import sys
import traceback
from pathlib import Path

from stepdoctor.collect.hooks.session import end_status, raised_at
from stepdoctor.errors import ScriptNotFoundError

__all__ = ["ScriptResult", "import_torch_if_available", "run_script"]


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
        runpy.run_path(str(path), run_name="__main__")
    except BaseException as exc:
        status, code, error = end_status(exc)
        if status == "stopped":  # a tuning run's step limit: not the job's failure
            return ScriptResult(status, code, error)
        if not isinstance(exc, SystemExit):
            tb = exc.__traceback__
            while tb is not None and tb.tb_frame.f_code.co_filename != str(path):
                tb = tb.tb_next
            traceback.print_exception(type(exc), exc, tb or exc.__traceback__)
        elif error:
            print(error, file=sys.stderr)
        return ScriptResult(status, code, error, raised_at(exc))
    finally:
        sys.argv = saved_argv
        if saved_path0 is not None:
            sys.path[0] = saved_path0
    return ScriptResult("ok", 0, "")
