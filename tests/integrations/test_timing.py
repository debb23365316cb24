"""The integrations' common part: phases, hook times and settings fed into a real session,
and back from its record; the auto-installer's post-import hooks."""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path

import pytest

from stepdoctor.collect import Session
from stepdoctor.integrations import AutoIntegrations
from stepdoctor.integrations._timing import (
    FrameworkTimer,
    OwnSession,
    note_settings,
    patch_class,
    time_method,
)
from stepdoctor.record import load_run

pytest.importorskip("torch")

from tests.collect.test_session import FixedReader


def test_phases_hooks_and_settings_reach_the_record(tmp_path: Path) -> None:
    with Session(tmp_path, readers=[FixedReader()], instrument_torch=False) as doc:
        timer = FrameworkTimer(doc)
        note_settings(doc, "lightning", "2.6.6", {"log_every_n_steps": 1, "precision": "32"})
        for _ in range(3):
            timer.enter("callbacks")
            timer.leave()
            timer.hook("WeightStats.on_train_batch_end", "callbacks", 2_000_000)
            timer.hook("logging (log_metrics)", "callbacks", 500_000)
            timer.step(8)
    rec = doc.record
    assert rec is not None and len(rec.steps) == 3
    assert all("callbacks" in s.phase_ns for s in rec.steps)
    hooks = {h.name: (h.phase, h.calls, h.total_ns) for h in rec.hooks}
    assert hooks == {
        "WeightStats.on_train_batch_end": ("callbacks", 3, 6_000_000),
        "logging (log_metrics)": ("callbacks", 3, 1_500_000),
    }
    assert rec.env_value("framework") == "lightning"
    assert rec.env_value("lightning.log_every_n_steps") == 1
    again = load_run(tmp_path)  # the hook table as written last, the settings as env facts
    assert {h.name: h.calls for h in again.hooks} == {n: c for n, (_, c, _) in hooks.items()}
    assert again.env_value("lightning.precision") == "32"


def test_a_callback_joins_a_running_session_and_ends_only_its_own(tmp_path: Path) -> None:
    with Session(tmp_path / "run", readers=[FixedReader()], instrument_torch=False) as doc:
        joined = OwnSession()
        assert joined.open() is doc
        joined.close()  # not its own: the run goes on
        doc.step(1)
    own = OwnSession(out_dir=tmp_path / "own", report=False)
    session = own.open()
    assert session is not doc
    session.step(4)
    own.close()
    assert len(load_run(tmp_path / "own").steps) == 1


def test_a_framework_imported_installs_its_integration_once_and_uninstall_undoes_it(
    tmp_path: Path, monkeypatch: object
) -> None:
    calls: list[str] = []
    fake = types.ModuleType("stepdoctor_fake_integration")

    def install(session: object, *args: str) -> object:
        calls.append("install")
        return lambda: calls.append("undo")

    fake.install = install  # type: ignore[attr-defined]
    sys.modules["stepdoctor_fake_integration"] = fake
    modules = {"stepdoctor_fake_framework": ("stepdoctor_fake_integration", ())}
    try:
        with Session(tmp_path / "run", readers=[FixedReader()], instrument_torch=False) as doc:
            auto = AutoIntegrations(doc, modules)
            auto.install()
            auto.install()  # watched twice: installed once
            _import_module_file(tmp_path, "stepdoctor_fake_framework")
            _import_module_file(tmp_path, "stepdoctor_fake_framework")  # imported: not again
            auto.uninstall()
        assert calls == ["install", "undo"]
    finally:
        sys.modules.pop("stepdoctor_fake_framework", None)
        sys.modules.pop("stepdoctor_fake_integration", None)


def _import_module_file(folder: Path, name: str) -> object:
    """Import ``name`` from a file of its own in ``folder``, as a job imports a framework."""
    (folder / f"{name}.py").write_text("LOADED = True\n")
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(folder))


def test_an_integration_that_fails_is_a_notice_and_the_job_goes_on(tmp_path: Path) -> None:
    broken = types.ModuleType("stepdoctor_broken_integration")

    def install(session: object) -> object:
        raise RuntimeError("changed API")

    broken.install = install  # type: ignore[attr-defined]
    sys.modules["stepdoctor_broken_integration"] = broken
    modules = {"stepdoctor_broken_framework": ("stepdoctor_broken_integration", ())}
    try:
        with Session(tmp_path / "run", readers=[FixedReader()], instrument_torch=False) as doc:
            auto = AutoIntegrations(doc, modules)
            auto.install()
            assert _import_module_file(tmp_path, "stepdoctor_broken_framework").LOADED  # type: ignore[attr-defined]
            doc.step(1)
            auto.uninstall()
        rec = doc.record
        assert rec is not None
        assert any("changed API" in n.message for n in rec.notices)
    finally:
        sys.modules.pop("stepdoctor_broken_integration", None)
        sys.modules.pop("stepdoctor_broken_framework", None)


def test_a_function_set_on_the_instance_is_wrapped_in_place_and_put_back() -> None:
    """``own``: the attribute is the instance's (Keras's ``train_function``): wrapped where it
    is, each call's start told to ``on_call``, and the original put back by the undo; a
    method of the class is not taken for one (and the reverse)."""

    class Job:
        def step(self) -> str:
            return "method"

    job = Job()

    def train() -> str:
        return "trained"

    job.train = train  # type: ignore[attr-defined]
    events: list[tuple[object, ...]] = []
    calls: list[str] = []
    began: list[int] = []
    timer = types.SimpleNamespace(
        clock=iter(range(100)).__next__,
        enter=lambda phase: events.append(("enter", phase)),
        leave=lambda: events.append(("leave",)),
        hook=lambda *a: calls.append(a[0]),
    )
    assert time_method(job, "step", timer, "train_step", own=True) is None  # the class's
    assert time_method(job, "train", timer, "train_step") is None  # the instance's
    undo = time_method(job, "train", timer, "train_step", own=True, on_call=began.append)
    assert undo is not None
    assert job.train() == "trained"  # type: ignore[attr-defined]
    assert events == [("enter", "train_step"), ("leave",)] and began == [0] and calls == []
    undo()
    assert job.train is train  # type: ignore[attr-defined]


def test_a_patched_class_gets_back_its_own_attribute_or_its_inherited_one() -> None:
    class Base:
        def inherited(self) -> str:
            return "base"

    class Kind(Base):
        def own(self) -> str:
            return "kind"

    own_method, patched = Kind.__dict__["own"], (lambda self: "patched")
    undo_own = patch_class(Kind, "own", patched)
    undo_inherited = patch_class(Kind, "inherited", patched)
    assert Kind().own() == Kind().inherited() == "patched"
    undo_own()
    undo_inherited()
    assert Kind.__dict__["own"] is own_method and "inherited" not in vars(Kind)
    assert Kind().inherited() == "base"
    # an undo leaves alone what was set over the patch since
    undo = patch_class(Kind, "own", patched)
    later = lambda self: "later"  # noqa: E731
    Kind.own = later  # type: ignore[method-assign]
    undo()
    assert Kind.__dict__["own"] is later
