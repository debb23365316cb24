"""What a scenario's report may say about the machine rather than the job.

The zoo runs real jobs on a shared machine: other processes may take its CPUs while a scenario
runs (a busy CI host, a parallel build, the CPU burners of the loaded fresh-clone check).
``competing-processes`` then rightly tops the report. These helpers let the zoo tests judge the
verdict about the job itself, and check that a finding about the machine is there exactly when
the run's own record shows the machine busy.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from stepdoctor.model.measured import measured_steps
from stepdoctor.record import load_run
from stepdoctor.rules._severity import MIN_SAVED_S, SAVED_METRIC
from stepdoctor.rules.competing_processes import WARNING_SHARE

__all__ = [
    "MACHINE_RULES",
    "about_the_job",
    "machine_was_busy",
    "others_share",
    "saves_under_a_second",
    "warmup_of",
]

#: Findings whose subject is the machine's other load, not the job.
MACHINE_RULES = frozenset({"competing-processes"})

LOUD = ("warning", "critical")


def others_share(run_dir: Path, warmup_steps: int = 0) -> float:
    """Other processes' mean share of the machine's CPUs, from the run's record, while its
    steps after ``warmup_steps`` ran (the window ``competing-processes`` judges: other load
    that starts or stops during start-up moves the whole run's mean across its threshold)."""
    record = load_run(run_dir)
    samples = record.system
    steps = measured_steps(record.steps, warmup_steps, frozenset())
    if steps:
        start, end = steps[0].start_ns, steps[-1].end_ns
        samples = tuple(s for s in samples if start <= s.t_ns <= end) or samples
    cpus = 100.0 * (record.meta.cpu_count or 1)
    shares = [s.other_cpu_pct / cpus for s in samples if s.other_cpu_pct is not None]
    return statistics.fmean(shares) if shares else 0.0


def machine_was_busy(run_dir: Path, warmup_steps: int = 0) -> bool:
    """Whether other processes took competing-processes' share of the CPUs during the run's
    measured steps."""
    return others_share(run_dir, warmup_steps) >= WARNING_SHARE


def warmup_of(report: dict[str, object]) -> int:
    """The report's warm-up steps: the verdicts are read from the steps after them."""
    summary = report["summary"]
    assert isinstance(summary, dict)
    return int(summary.get("warmup_steps") or 0)


def about_the_job(report: dict[str, object], run_dir: Path) -> list[dict[str, object]]:
    """The report's findings about the job, in rank order, after checking the ones about the
    machine: a loud ``competing-processes`` only when the record shows the machine busy."""
    findings = report["findings"]
    assert isinstance(findings, list)
    warm = warmup_of(report)
    busy = machine_was_busy(run_dir, warm)
    for finding in findings:
        if finding["rule"] in MACHINE_RULES and finding["severity"] in LOUD:
            share = others_share(run_dir, warm)
            assert busy, f"{finding['rule']} on a machine {share:.0%} busy"
    return [f for f in findings if f["rule"] not in MACHINE_RULES]


def saves_under_a_second(findings: list[dict[str, object]], rule_id: str) -> bool:
    """Whether the planted rule's finding is info because its fix would save under
    ``MIN_SAVED_S`` over the run's steps (a mild dose of a few percent: autograd left on in
    inference), and nothing about the job is louder."""
    planted = [f for f in findings if f["rule"] == rule_id]
    if not planted or any(f["severity"] in LOUD for f in findings):
        return False
    saved = {e["metric"]: e["value"] for e in planted[0]["evidence"]}.get(SAVED_METRIC)  # type: ignore[union-attr]
    return planted[0]["severity"] == "info" and isinstance(saved, float) and saved < MIN_SAVED_S
