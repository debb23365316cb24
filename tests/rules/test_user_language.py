"""Findings speak of the user's code, data and settings: no rule id, no word of stepdoctor's own
tests or internals in what a finding explains or recommends."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from stepdoctor.model import (
    ConcurrencyStat,
    Finding,
    LayerInfo,
    LoaderInfo,
    ModelInfo,
    ProcessUsage,
    RunRecord,
)
from stepdoctor.report import build_report
from stepdoctor.rules import RULES, RuleContext, run_rules
from tests.builders import env, record, samples, steps

RULES_DIR = Path(__file__).parents[2] / "src" / "stepdoctor" / "rules"
#: Rule ids that are ordinary words of the domain ("float64" is a dtype, "stragglers" a word):
#: prose may use them as such.
WORD_IDS = frozenset({"float64", "stragglers"})
#: Words of stepdoctor's own tests and internals, never of the user's job.
INTERNAL = re.compile(
    r"\bzoo\b|\bscenario|hot path|RuleContext|RunRecord|StepTiming|SystemSample|ModelInfo|"
    r"LoaderInfo|BoundVerdict|\breducer\b",
    re.IGNORECASE,
)


def _forbidden() -> re.Pattern[str]:
    ids = sorted(set(RULES) - WORD_IDS, key=len, reverse=True)
    return re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, ids)) + r")(?![\w-])")


def _prose(f: Finding) -> dict[str, str]:
    return {
        "title": f.title,
        "explanation": f.explanation,
        "fix": f.fix.summary,
        "snippet": f.fix.snippet or "",
        "speed-up": f.speedup.basis,
        "model": f.modelled.basis if f.modelled else "",
    }


def _dense(name: str, n_in: int, n_out: int) -> LayerInfo:
    return LayerInfo(
        name=name, kind="linear", params=n_in * n_out, in_features=n_in, out_features=n_out
    )


def _model(model_id: int, **kw: object) -> ModelInfo:
    layers = (_dense("hidden", 1002, 4096), _dense("classifier", 4096, 50_000))
    fields: dict[str, object] = {
        "model_id": model_id,
        "class_name": "Net",
        "param_count": sum(x.params for x in layers),
        "param_bytes": 8 * sum(x.params for x in layers),
        "param_dtypes": ("torch.float64",),
        "devices": ("cpu",),
        "layers": layers,
        "kinds": {"linear": 2, "dropout": 1},
    }
    fields.update(kw)
    return ModelInfo(**fields)  # type: ignore[arg-type]


def _shared(calls: int, *, grad: int = 0) -> ConcurrencyStat:
    return ConcurrencyStat(
        model_id=1, class_name="Net", calls=calls, threads=4, max_concurrent=4,
        concurrent_calls=calls // 2, solo_mean_ns=1e6, concurrent_mean_ns=8e6,
        grad_calls=grad, train_mode_calls=grad,
    )  # fmt: skip


def _records() -> dict[str, RunRecord]:
    """Runs with many faults at once, so that most rules (and their branches that refer to
    one another) speak."""
    slow = steps(
        300,
        phases_ms={"data_wait": 12, "forward": 5, "backward": 5, "other": 8},
        batch=2,
        gc_ms=3,
        every={20: {"checkpoint": 200, "forward": 100}},
    )
    hog = (ProcessUsage(pid=42, name="stress", cpu_pct=190.0),)
    busy = tuple(
        dataclasses.replace(x, top_others=hog)
        for x in samples(slow, job_cpu=100.0, other_cpu=200.0, rss=[500 * 2**20, 4 * 2**30])
    )
    faults = env(
        torch__num_threads=16, cpu__affinity=2, gpu__count=1, gpu__names="A100",
        torch__cuda_build=None, torch__version="2.13.0+cpu", torch__cuda_available=False,
        mem__total_bytes=4 * 2**30, mem__swap_used_bytes=2**30, shm__total_bytes=64 * 2**20,
        torch__default_dtype="torch.float64",
    )  # fmt: skip
    loader = LoaderInfo(loader_id=1, num_workers=0, batch_size=None, prefetch_factor=None)
    training = record(
        slow, cores=2, system=busy, facts=faults, loaders=(loader,),
        models=(_model(1), _model(2), _model(3, devices=("cpu", "cuda"))),
        concurrency=(_shared(300),), batch_dtypes=("torch.float64",),
    )  # fmt: skip
    # Threads sharing one model: the outliers and the time between steps are its symptoms.
    contended = record(
        steps(300, phases_ms={"forward": 10, "other": 10}, every={20: {"forward": 100}}),
        concurrency=(_shared(300),),
    )
    inference = record(
        [dataclasses.replace(s, boundary="model") for s in steps(60, phases_ms={"forward": 10})],
        models=(_model(1, param_dtypes=("torch.float16",), devices=("cuda",)),),
        concurrency=(_shared(60, grad=60),),
    )
    return {"training": training, "contended": contended, "inference": inference}


def _findings() -> list[Finding]:
    found: list[Finding] = []
    for rec in _records().values():
        found += build_report(rec).findings
        found += run_rules(RuleContext(rec))[0]  # before the report merges or caps any
    return found


def test_built_runs_make_most_rules_speak() -> None:
    spoke = {f.rule for f in _findings()}
    run_rules_ids = {r.id for r in RULES.values() if r.scope != "trace"}
    assert len(spoke) >= 16, sorted(run_rules_ids - spoke)


def test_no_finding_names_a_rule_id_or_our_internals() -> None:
    forbidden = _forbidden()
    for f in _findings():
        for where, text in _prose(f).items():
            assert not forbidden.search(text), f"{f.rule} {where}: {text!r}"
            assert not INTERNAL.search(text), f"{f.rule} {where}: {text!r}"


def _prose_literals(path: Path) -> list[tuple[int, str]]:
    """The string literals of a rule module that are prose (with a space), docstrings and
    comments left out."""
    tree = ast.parse(path.read_text())
    docs = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and " " in node.value
        and id(node) not in docs
    ]


@pytest.mark.parametrize("path", sorted(RULES_DIR.glob("*.py")), ids=lambda p: p.name)
def test_no_prose_in_the_rules_names_a_rule_id_or_our_internals(path: Path) -> None:
    # The branches no built run reaches, too: every sentence a rule module can say.
    forbidden = _forbidden()
    for line, text in _prose_literals(path):
        if path.name == "registry.py":  # the registry's own messages name the rule they refuse
            continue
        assert not forbidden.search(text), f"{path.name}:{line}: {text!r}"
        assert not INTERNAL.search(text), f"{path.name}:{line}: {text!r}"
