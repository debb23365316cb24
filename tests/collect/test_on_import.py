"""The post-import hooks that instrument torch and install the frameworks' integrations as the
job imports them (``stepdoctor.collect.hooks.on_import``), on real imports of real files."""

from __future__ import annotations

import importlib
import importlib.resources
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from stepdoctor.collect.hooks.on_import import when_imported

PACKAGE = "stepdoctor_hooked_pkg"


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    """A package of three modules on ``sys.path``; each one records when it has run."""
    pkg = tmp_path / PACKAGE
    pkg.mkdir()
    (pkg / "__init__.py").write_text("import sys\nsys.modules[__name__].RAN = True\n")
    (pkg / "sub.py").write_text("RAN = True\nTHREAD = __import__('threading').get_ident()\n")
    (pkg / "other.py").write_text("RAN = True\n")
    (pkg / "data.txt").write_text("a resource\n")
    sys.path.insert(0, str(tmp_path))
    yield tmp_path
    sys.path.remove(str(tmp_path))
    for name in [n for n in sys.modules if n.split(".")[0] == PACKAGE]:
        del sys.modules[name]


def test_a_hook_runs_once_the_module_has_run_with_the_module(folder: Path) -> None:
    seen: list[tuple[str, bool]] = []
    when_imported(f"{PACKAGE}.sub", lambda m: seen.append((m.__name__, m.RAN)))
    when_imported(PACKAGE, lambda m: seen.append((m.__name__, m.RAN)))
    assert not seen
    sub = importlib.import_module(f"{PACKAGE}.sub")
    assert seen == [(PACKAGE, True), (f"{PACKAGE}.sub", True)]  # the package runs first
    importlib.import_module(f"{PACKAGE}.other")  # not watched: no hook
    importlib.reload(sub)  # once only
    assert len(seen) == 2
    # the module's loader is its own, as without the hook: its resources are read through it
    assert type(sub.__loader__).__name__ == "SourceFileLoader"
    assert sub.__spec__ is not None and sub.__spec__.loader is sub.__loader__
    assert importlib.resources.files(PACKAGE).joinpath("data.txt").read_text() == "a resource\n"


def test_a_module_imported_already_is_hooked_at_once(folder: Path) -> None:
    module = importlib.import_module(PACKAGE)
    seen: list[ModuleType] = []
    when_imported(PACKAGE, seen.append)
    assert seen == [module]


def test_the_hook_runs_in_the_thread_that_imports(folder: Path) -> None:
    threads: list[int] = []
    when_imported(f"{PACKAGE}.sub", lambda m: threads.append(threading.get_ident()))
    importer = threading.Thread(target=importlib.import_module, args=(f"{PACKAGE}.sub",))
    importer.start()
    importer.join()
    assert threads == [importer.ident] == [sys.modules[f"{PACKAGE}.sub"].THREAD]


def test_a_hook_that_fails_is_logged_and_the_import_goes_on(
    folder: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(module: ModuleType) -> None:
        raise RuntimeError("a changed API")

    seen: list[str] = []
    when_imported(PACKAGE, broken)
    when_imported(PACKAGE, lambda m: seen.append(m.__name__))
    assert importlib.import_module(PACKAGE).RAN
    assert seen == [PACKAGE]  # the next hook still runs
    assert "a hook on importing stepdoctor_hooked_pkg failed" in caplog.text


def test_a_watched_module_that_is_not_there_fails_to_import_as_without_the_hook(
    folder: Path,
) -> None:
    when_imported("stepdoctor_no_such_module", lambda m: None)
    with pytest.raises(ModuleNotFoundError, match="stepdoctor_no_such_module"):
        importlib.import_module("stepdoctor_no_such_module")
