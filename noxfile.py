"""Every supported CPython, each in a venv of its own (``make test-pythons``).

On the lowest: lint, types and import contracts (as ``make lint`` does, with that
interpreter's tools). On each: the package built and installed as a wheel (its C parts
compiled against that interpreter's headers; ``STEPDOCTOR_REQUIRE_C_PARTS=1`` fails the run
where one did not build), then the tests that are not scenario runs, without torch (the
modules that need it skip and say so: the torch-dependent tests and the zoo run under
``make test``), among them ``tests/test_watched_job.py``: a job watched under
``stepdoctor run`` with the C parts and with ``STEPDOCTOR_PURE_PYTHON=1``.

An interpreter that is not on PATH is skipped, and nox's summary names it.
"""

from __future__ import annotations

import nox

PYTHONS = ("3.10", "3.11", "3.12", "3.13")
SOURCES = ("src", "tests", "benchmarks", "examples", "hatch_build.py", "noxfile.py")
#: What the tests need besides the package (the ``dev`` extra less torch and the frameworks).
TEST_TOOLS = ("pytest", "hypothesis", "jsonschema", "numpy", "scipy", "pysimdjson")

nox.options.default_venv_backend = "venv"
nox.options.error_on_missing_interpreters = False
nox.options.sessions = ["lint", "tests"]


def _install(session: nox.Session, *packages: str) -> None:
    session.install("-c", "constraints.txt", *packages)


@nox.session(python=PYTHONS[0])
def lint(session: nox.Session) -> None:
    """ruff, mypy (strict, ``python_version`` the lowest) and import-linter."""
    _install(session, ".", "ruff", "mypy", "import-linter", "types-psutil")
    session.run("ruff", "check", *SOURCES)
    session.run("ruff", "format", "--check", *SOURCES)
    session.run("mypy")
    session.run("lint-imports")


@nox.session(python=list(PYTHONS))
def tests(session: nox.Session) -> None:
    """The wheel with its C parts, then every test but the scenario runs, without torch."""
    _install(session, ".", *TEST_TOOLS)
    session.run(
        "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not scenario",
        *session.posargs,
        env={"STEPDOCTOR_REQUIRE_C_PARTS": "1"},
    )  # fmt: skip
