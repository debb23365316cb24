"""Every supported CPython, each in a venv of its own (``make test-pythons``).

- ``lint``, on the lowest: ruff, mypy and import-linter, as ``make lint`` runs them, run by
  that interpreter; mypy reads the types of torch and the frameworks from the dev venv
  (``.venv``): the index this project reaches has no CPU build of torch for every interpreter.
- ``tests``, on each but the dev venv's own (``make test`` runs these tests and the zoo on
  it, with its C parts, torch and the frameworks): the package built and installed as a wheel
  (its C parts compiled against
  that interpreter's headers; ``STEPDOCTOR_REQUIRE_C_PARTS=1`` fails the run where one did not
  build), then the tests that are not scenario runs, without torch (those that need it skip and
  say so: they and the zoo run under ``make test``), in two parts as ``make test`` runs them
  (spread over the cores, then those marked ``serial``), among them ``tests/test_watched_job.py``:
  a job watched under ``stepdoctor run`` with the C parts and with ``STEPDOCTOR_PURE_PYTHON=1``.
- ``package``, on the lowest: the sdist and the wheel, each installed in a fresh venv that
  watches a job (``tests/test_package.py``).

An interpreter that is not on PATH is skipped, and nox's summary names it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import nox

PYTHONS = ("3.10", "3.11", "3.12", "3.13")
SOURCES = ("src", "tests", "benchmarks", "examples", "hatch_build.py", "noxfile.py")
#: What the tests need besides the package (the ``dev`` extra less torch and the frameworks).
TEST_TOOLS = ("pytest", "pytest-xdist", "hypothesis", "jsonschema", "numpy", "scipy", "pysimdjson")

# uv makes each venv and installs into it in seconds (pip: about a minute a session here);
# plain venv and pip where uv is missing. uv never downloads an interpreter: one that is not
# on PATH is skipped, as with venv.
nox.options.default_venv_backend = "uv|venv"
os.environ.setdefault("UV_PYTHON_DOWNLOADS", "never")
nox.options.error_on_missing_interpreters = False
nox.options.sessions = ["lint", "tests", "package"]
#: The dev venv (``make venv``): torch, the frameworks and their types.
DEV_PYTHON = Path(__file__).parent / ".venv" / "bin" / "python"


def _dev_version() -> str | None:
    """The dev venv's CPython (``3.11``), whose tests ``make test`` runs; None without it."""
    try:
        out = subprocess.run(
            [str(DEV_PYTHON), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True, text=True, check=True, timeout=60,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


#: The interpreters ``tests`` runs on: every supported one but the dev venv's.
TEST_PYTHONS = [v for v in PYTHONS if v != _dev_version()]


def _install(session: nox.Session, *packages: str) -> None:
    session.install("-c", "constraints.txt", *packages)


@nox.session(python=PYTHONS[0])
def lint(session: nox.Session) -> None:
    """ruff, mypy (strict, ``python_version`` the lowest) and import-linter."""
    _install(session, ".", "ruff", "mypy", "import-linter", "types-psutil")
    session.run("ruff", "check", *SOURCES)
    session.run("ruff", "format", "--check", *SOURCES)
    session.run("mypy", f"--python-executable={DEV_PYTHON}")
    session.run("lint-imports")


@nox.session(python=TEST_PYTHONS)
def tests(session: nox.Session) -> None:
    """The wheel with its C parts, then every test but the scenario runs, without torch."""
    _install(session, ".", *TEST_TOOLS)
    # fewer property-test examples than make test's 300 (tests/conftest.py's profiles)
    env = {"STEPDOCTOR_REQUIRE_C_PARTS": "1", "HYPOTHESIS_PROFILE": "pythons"}
    pytest = ("python", "-m", "pytest", "-q", "-p", "no:cacheprovider")
    # as make test: spread over the cores, then the tests marked serial one at a time
    parallel = ("-n", "auto", "--dist", "worksteal")
    session.run(*pytest, *parallel, "-m", "not scenario and not package and not serial",
                *session.posargs, env=env)  # fmt: skip
    session.run(*pytest, "-m", "serial and not scenario and not package", *session.posargs, env=env)


@nox.session(python=PYTHONS[0])
def package(session: nox.Session) -> None:
    """The sdist and the wheel, each installed in a fresh venv that watches a job
    (``tests/test_package.py``: the wheel with its C parts, the sdist without a compiler)."""
    _install(session, ".", "build", *TEST_TOOLS)  # the package too: the tests import it
    session.run(
        "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "package",
        "tests/test_package.py", *session.posargs,
    )  # fmt: skip
