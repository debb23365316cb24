"""The scenario zoo: real training runs on this CPU with one fault planted each.

Every faulty script, at both magnitudes, must put its rule on top of the findings about the
job, with warning or critical severity; its fixed twin (``ZOO_FIXED=1``) and the healthy
scripts must raise no warning or critical finding about the job. The scripts are listed in
``_catalog``.
Findings about the machine (other processes taking its CPUs) must match what the run's record
shows (``_verdicts``). Each run is a process of its own under ``stepdoctor run`` (a fixed number
of steps and at least 3 s of training), forked from one that has imported torch
(``tests/_zygote.py``; ``ZOO_FRESH_PROCESS=1``: a fresh process each).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from stepdoctor.record import load_run
from tests._machine import judged
from tests._zygote import stepdoctor_run

from ._catalog import (
    FAULTS,
    FIXED_TWIN_ALARMS,
    HEALTHY,
    MAGNITUDES,
    PLANTED_CODE,
)
from ._verdicts import LOUD, MACHINE_RULES, about_the_job, saves_under_a_second, warmup_of

HERE = Path(__file__).parent
# The jobs run in processes of their own, not measured; what runs here reads their records,
# which the record's own tests cover (traced, a record's load took 0.45 s instead of 0.14)
pytestmark = pytest.mark.no_cover


def run_scenario(
    script: str, tmp_path: Path, env: dict[str, str] | None = None
) -> tuple[dict[str, object], Path]:
    """Run ``script`` under ``stepdoctor run`` with ``env`` added to the environment: its JSON
    report and its run folder."""
    out = tmp_path / "report.json"
    proc = stepdoctor_run(
        [
            "run",
            "--no-report",
            "--json",
            str(out),
            "--out",
            str(tmp_path / "run"),
            str(HERE / script),
        ],
        timeout=120,
        env={**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    report: dict[str, object] = json.loads(out.read_text())
    return report, tmp_path / "run"


def _window(run: tuple[dict[str, object], Path]) -> tuple[Path, int]:
    """The run's folder and its warm-up steps: where ``judged`` reads whether it was busy."""
    report, run_dir = run
    return run_dir, warmup_of(report)


def _describe(report: dict[str, object]) -> str:
    """The findings in a line, and the top one's title and evidence: what a failure on a
    CI host (which cannot be rerun to look) needs to be understood."""
    findings = report["findings"]
    assert isinstance(findings, list)
    line = "; ".join(f"{f['rule']} {f['severity']} x{f['estimated_speedup']:.2f}" for f in findings)
    if not findings:
        return line
    top = findings[0]
    evidence = ", ".join(
        f"{e['metric']}={e['value']}{e.get('unit') or ''}" for e in top.get("evidence", [])
    )
    return f"{line}\n  top: {top.get('title', '')}: {evidence}"


#: Faults planted as other processes that load the machine: run beside no other test (``serial``).
LOADS_THE_MACHINE = frozenset({"competing_processes.py"})


def _doses() -> list[object]:
    """(script, rule, magnitude) to run: every fault once, at the dose its test needs: strong
    where the finding must name the planted code (``PLANTED_CODE``: the stacks need the
    fault's time to sample), else mild, the harder one to find; every fault at both doses with
    ``ZOO_EVERY_DOSE=1``. (The budget of ``make test``: a run takes ~6 s beside another test on
    the 2-core reference machine; ``benchmarks/accuracy.py`` runs both doses of every fault and
    writes docs/accuracy.md.)"""
    every = os.environ.get("ZOO_EVERY_DOSE") == "1"
    return [
        pytest.param(
            script,
            rule_id,
            magnitude,
            marks=[pytest.mark.serial] if script in LOADS_THE_MACHINE else [],
        )
        for script, rule_id in sorted(FAULTS.items())
        for magnitude in MAGNITUDES
        if every or magnitude == ("strong" if script in PLANTED_CODE else "mild")
    ]


@pytest.mark.scenario
@pytest.mark.parametrize(("script", "rule_id", "magnitude"), _doses())
def test_planted_fault_comes_out_on_top(
    script: str, rule_id: str, magnitude: str, tmp_path: Path
) -> None:
    def judge(run: tuple[dict[str, object], Path]) -> None:
        report, run_dir = run
        job = about_the_job(report, run_dir)
        findings = report["findings"] if rule_id in MACHINE_RULES else job
        assert isinstance(findings, list) and findings, "no findings"
        if saves_under_a_second(findings, rule_id):
            return  # info is the verdict on a fault this small in a run this short
        top = findings[0]
        assert top["rule"] == rule_id, _describe(report)
        assert top["severity"] in LOUD, _describe(report)
        assert top["evidence"] and top["fix"]["summary"]
        if magnitude == "strong" and script in PLANTED_CODE:
            _names_the_planted_code(top, *PLANTED_CODE[script])

    env = {"ZOO_MAGNITUDE": magnitude, "ZOO_FIXED": "0"}
    judged(lambda folder: run_scenario(script, folder, env), _window, judge, tmp_path)


def _names_the_planted_code(
    finding: dict[str, object], phase: str, function: str, calls: str
) -> None:
    """The finding's first site of ``phase`` is the planted function (sampled stacks), or for
    ``tensors`` its first group of kept tensors is a planted one (``function``: "|" between
    them), held where planted."""
    if phase == "tensors":
        kept = [a for a in finding["allocated_at"] if a["kind"] == "tensors"]  # type: ignore[union-attr,index]
        assert kept, f"no kept tensors named: {finding['allocated_at']}"
        assert kept[0]["function"] in function.split("|") and calls in kept[0]["caller"], kept
        return
    sites = [w for w in finding["where"] if w["phase"] == phase]  # type: ignore[union-attr,index]
    assert sites, f"no site of {phase}: {finding['where']}"
    assert sites[0]["function"] == function, sites
    assert sites[0]["calls"] == calls or not calls, sites
    assert sites[0]["share"] >= 0.5, sites


@pytest.mark.scenario
@pytest.mark.parametrize("script", HEALTHY)
def test_healthy_run_raises_no_warning(script: str, tmp_path: Path) -> None:
    def judge(run: tuple[dict[str, object], Path]) -> None:
        report, run_dir = run
        loud = [f for f in about_the_job(report, run_dir) if f["severity"] in LOUD]
        assert not loud, _describe(report)

    report, run_dir = judged(lambda folder: run_scenario(script, folder), _window, judge, tmp_path)
    summary = report["summary"]
    assert isinstance(summary, dict)
    assert summary["steps"] > 20 and summary["samples_per_sec"] > 0
    if script == "healthy_workers.py":  # its worker is known as one: no helper process
        assert load_run(run_dir).loader_workers


def _twin(script: str) -> object:
    reason = FIXED_TWIN_ALARMS.get(script)
    return pytest.param(script, marks=pytest.mark.xfail(reason=reason)) if reason else script


@pytest.mark.scenario
@pytest.mark.parametrize("script", [_twin(s) for s in sorted(FAULTS)])
def test_fixed_twin_raises_no_warning(script: str, tmp_path: Path) -> None:
    def judge(run: tuple[dict[str, object], Path]) -> None:
        report, run_dir = run
        loud = [f for f in about_the_job(report, run_dir) if f["severity"] in LOUD]
        assert not loud, _describe(report)

    env = {"ZOO_FIXED": "1"}
    expected_loud = script in FIXED_TWIN_ALARMS  # xfail: its warning needs no second run
    judged(
        lambda folder: run_scenario(script, folder, env), _window, judge, tmp_path,
        again=not expected_loud,
    )  # fmt: skip
