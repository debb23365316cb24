"""The package as a user gets it: ``python -m build`` gives an sdist and a wheel; each installs
into a fresh venv and watches a job there. The wheel carries the C parts built here; the sdist,
built where no C compiler is on PATH, installs its pure-Python twins and still works.

Slow (two venvs, their dependencies from the index): marked ``package``, run by
``make test-pythons`` (``nox -s package``), not by ``make test``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from tests.marks import needs_module
from tests.test_watched_job import JOB, STEPS, TWINNED, printed_by_job

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.package, needs_module("build", "python -m build")]


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist and the wheel (built from the sdist, as ``python -m build`` does)."""
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return out


def _venv(where: Path) -> Path:
    venv.create(where, with_pip=True)
    return where / "bin" / "python"


def _watch_a_job(python: Path, tmp_path: Path) -> tuple[set[str], dict[str, object]]:
    """Run the watched job with ``python`` away from the checkout: the C parts its process
    loaded and its JSON report."""
    script, out = tmp_path / "job.py", tmp_path / "report.json"
    script.write_text(JOB)
    proc = subprocess.run(
        [str(python), "-m", "stepdoctor", "run", "--no-report", "--json", str(out)]
        + ["--out", str(tmp_path / "run"), str(script), str(STEPS)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != "STEPDOCTOR_PURE_PYTHON"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    parts, _ = printed_by_job(proc.stdout)
    return parts, json.loads(out.read_text())


def _install(python: Path, what: Path, env: dict[str, str] | None = None) -> None:
    proc = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "-c", str(ROOT / "constraints.txt"), str(what)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def test_the_wheel_has_its_c_parts_metadata_and_licence(dist: Path) -> None:
    (wheel,) = dist.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    built = {n.split("/")[-1].split(".")[0] for n in names if n.endswith(".so")}
    assert built >= {"_hotpath", "_reduce", "_sample", "_scan", "_gcscan"}
    assert "stepdoctor/py.typed" in names
    info = next(n for n in names if n.endswith(".dist-info/METADATA"))
    metadata = zipfile.ZipFile(wheel).read(info).decode()
    assert "License-Expression: Apache-2.0" in metadata and "Requires-Python: >=3.10" in metadata
    assert "Project-URL: Source" in metadata and "Typing :: Typed" in metadata
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)


def test_the_wheel_installs_and_watches_a_job_with_its_c_parts(dist: Path, tmp_path: Path) -> None:
    python = _venv(tmp_path / "venv")
    (wheel,) = dist.glob("*.whl")
    _install(python, wheel)
    parts, report = _watch_a_job(python, tmp_path)
    assert parts >= TWINNED
    assert report["summary"]["steps"] == STEPS  # type: ignore[index]


def test_the_sdist_installs_without_a_compiler_and_runs_the_twins(
    dist: Path, tmp_path: Path
) -> None:
    python = _venv(tmp_path / "venv")
    (sdist,) = dist.glob("*.tar.gz")
    # PATH holds the venv alone: no cc, gcc or any compiler for setuptools' build_ext to find
    no_compiler = {**os.environ, "PATH": str(python.parent)}
    no_compiler.pop("CC", None)
    _install(python, sdist, env=no_compiler)
    parts, report = _watch_a_job(python, tmp_path)
    assert parts == set()
    assert report["summary"]["steps"] == STEPS  # type: ignore[index]
