"""How a job ended, for its record: the status and exit code, and where in the job's own code
(not Python's, a library's or stepdoctor's) it raised."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from stepdoctor.collect import end_status, raised_at
from stepdoctor.collect.hooks.trigger import StepLimitReached

JOB = """import json, sys

def parse(text):
    return json.loads(text)  # line 4: the error is raised inside the json module

def leave(code):
    sys.exit(code)  # line 7
"""


def _job(tmp_path: Path) -> ModuleType:
    path = tmp_path / "job.py"
    path.write_text(JOB)
    spec = importlib.util.spec_from_file_location("job_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _caught(call: object, *args: object) -> BaseException:
    try:
        call(*args)  # type: ignore[operator]
    except BaseException as exc:  # what a job may end with
        return exc
    raise AssertionError("no exception")


def test_innermost_frame_of_the_jobs_code_not_the_librarys(tmp_path: Path) -> None:
    job = _job(tmp_path)
    exc = _caught(job.parse, "{not json")
    assert isinstance(exc, json.JSONDecodeError)
    assert raised_at(exc) == f"{tmp_path / 'job.py'}:4"
    assert end_status(exc)[:2] == ("exception", 1)


def test_non_zero_exit_has_a_place_and_a_clean_one_none(tmp_path: Path) -> None:
    job = _job(tmp_path)
    assert raised_at(_caught(job.leave, 3)) == f"{tmp_path / 'job.py'}:7"
    assert end_status(_caught(job.leave, 3)) == ("exit", 3, "")
    assert raised_at(_caught(job.leave, 0)) == ""
    assert raised_at(_caught(job.leave, None)) == ""


@pytest.mark.parametrize("exc", [None, StepLimitReached("limit")])
def test_no_place_for_a_normal_end(exc: BaseException | None) -> None:
    assert raised_at(exc) == ""


def test_no_traceback_gives_no_place() -> None:
    assert raised_at(ValueError("never raised")) == ""
