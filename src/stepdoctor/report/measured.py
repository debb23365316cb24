"""What was measured, put on the findings: the experiments' ceiling (``run --experiments``),
a tuning sweep (``stepdoctor tune``) and the fixes ``run --verify`` tried; and the command
that would measure the figures still modelled."""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Sequence

from stepdoctor.model import (
    BoundVerdict,
    Evidence,
    Finding,
    Fix,
    FixTrial,
    Report,
    Severity,
    Speedup,
    SpeedupKind,
    Summary,
    TuneResult,
    TuneTrial,
)
from stepdoctor.rules import rank

__all__ = [
    "TUNED_WARNING",
    "VERIFY_MIN_GAIN",
    "attach_measurements",
    "attach_tune",
    "attach_verify",
    "judged",
    "measure_command",
    "with_achieved",
]

#: Which tuning changes measure which finding.
_TUNE_EVIDENCE = {
    "input-bound": ("num_workers", "pin_memory", "prefetch_factor", "persistent_workers"),
    "small-batch": ("batch_size",),
    "thread-oversubscription": ("threads",),
    "shared-model-threads": ("threads",),
}


def attach_measurements(
    findings: list[Finding], experiments: tuple[BoundVerdict, ...], summary: Summary
) -> list[Finding]:
    """Give ``input-bound`` the measured ceiling, or downgrade it when the measurement shows
    the loader is not what limits the job; re-rank."""
    if not experiments:
        return findings
    v = with_achieved(experiments[-1], summary)
    achieved = v.achieved_per_sec
    compute = v.compute_rate
    data = v.data_rate
    out = []
    for original in findings:
        finding = original
        if finding.rule == "input-bound" and achieved:
            measured = (
                f"data-only {data:,.0f} {v.unit}, compute-only (forward + backward) "
                f"{compute:,.0f} {v.unit}, the job {achieved:,.0f} {v.unit}"
            )
            if v.bound == "input":
                finding = finding.measured_as(
                    Speedup.measured(
                        max(1.0, compute / achieved),
                        f"measured ceiling with the input out of the way: {measured}",
                    )
                )
            else:
                finding = finding.measured_as(
                    Speedup.measured(
                        max(1.0, v.ceiling_per_sec / achieved),
                        f"measured ceiling (the slower part alone): {measured}",
                    ),
                    severity=Severity.INFO,
                    explanation=finding.explanation
                    + f" Measured: the loader alone is not the limit ({measured}); the "
                    "waits come from how batches are handed over (worker start-up each "
                    "epoch, per-batch overhead), not from the loader's throughput.",
                )
        out.append(finding)
    return rank(out)


def with_achieved(v: BoundVerdict, summary: Summary) -> BoundVerdict:
    achieved = summary.samples_per_sec if v.unit == "samples/s" else summary.batches_per_sec
    return dataclasses.replace(v, achieved_per_sec=achieved)


def attach_tune(report: Report, result: TuneResult) -> Report:
    """Give the findings of the tuned job's baseline run what the sweep measured.

    A finding whose fix the sweep tried gets the measured figure instead of its model: the
    best change of its kind when that beat the baseline beyond noise (its fix then names that
    change), else the best of its kind's trials, with the finding downgraded to info and its
    fix replaced: a change measured at no gain, or slower, is not recommended. A winning change
    that no finding suggested (a larger batch on a job no rule found too small) becomes a
    finding of its own. Findings are re-ranked by what they save.
    """
    base = result.baseline.median
    if not base:
        return report
    out = []
    taken = False
    for finding in report.findings:
        kinds = _TUNE_EVIDENCE.get(finding.rule, ())
        trials = [t for t in result.trials if t.change in kinds and t.median]
        if not trials:
            out.append(finding)
            continue
        curve = _curve(trials)
        best = max(trials, key=lambda t: t.median or 0.0)
        basis = f"stepdoctor tune ({result.unit}; baseline {base:,.0f}; {curve})"
        winner = result.best if result.best is not None and result.best.change in kinds else None
        if winner is not None:
            taken = True
            factor = result.speedup or 0.0
            out.append(
                judged(
                    finding,
                    _measured(winner, base, result.speedup, basis),
                    won=f"Measured best: {winner.change}={winner.value}, "
                    f"{factor:.2f}x the job's throughput.",
                )
            )
            continue
        factor = (best.median or 0.0) / base
        verdict = "slower than the job as it is" if factor < 1 else "not faster beyond noise"
        out.append(
            judged(
                finding,
                _measured(best, base, factor, basis),
                lost=f"Measured: every change this finding would suggest was {verdict} "
                f"({curve}; baseline {base:,.0f} {result.unit}).",
                keep=f"Keep the job's settings: stepdoctor tune measured {curve} against "
                f"{base:,.0f} {result.unit} as the job is, so none of these changes is "
                "recommended.",
            )
        )
    if result.best is not None and not taken:
        out.append(_tuned(result, base))
    findings = rank(out)
    return dataclasses.replace(
        report,
        findings=tuple(findings),
        measure_with=measure_command(report.meta.command, findings),
    )


def _curve(trials: list[TuneTrial]) -> str:
    return ", ".join(f"{t.change}={t.value}: {t.median:,.0f}" for t in trials if t.median)


def _measured(trial: TuneTrial, base: float, factor: float | None, basis: str) -> Speedup:
    """The speed-up ``trial`` measured (its median over ``base``), with its repeats' spread."""
    runs = trial.samples_per_sec
    spread = (min(runs) / base, max(runs) / base) if len(runs) > 1 else None
    return Speedup.measured(factor or (trial.median or 0.0) / base, basis, spread)


#: A winning tuning change no finding suggested is a warning from this speed-up (fournex's
#: 8% acceptance is what made it a winner; below 1.2x it is worth knowing, not pressing).
TUNED_WARNING = 1.2


def judged(
    finding: Finding, speedup: Speedup, *, won: str = "", lost: str = "", keep: str = ""
) -> Finding:
    """``finding`` with what a fix of it measured (``speedup``, by ``tune`` or ``run --verify``).

    Where the fix won (``won``: what it measured, put before the fix), the finding keeps its
    severity, raised from info to warning from ``TUNED_WARNING``. Otherwise it is info, ``lost``
    says why in its explanation and, with ``keep``, its fix is replaced by it: a change measured
    slower is never recommended.
    """
    if won:
        loud = speedup.factor >= TUNED_WARNING and finding.severity is Severity.INFO
        return finding.measured_as(
            speedup,
            severity=Severity.WARNING if loud else finding.severity,
            fix=Fix(summary=f"{won} {finding.fix.summary}", snippet=finding.fix.snippet),
        )
    return finding.measured_as(
        speedup,
        severity=Severity.INFO,
        explanation=f"{finding.explanation} {lost}",
        fix=Fix(summary=keep) if keep else finding.fix,
    )


def _tuned(result: TuneResult, base: float) -> Finding:
    """The sweep's winner, as a finding of its own (no rule suggested it)."""
    best = result.best
    assert best is not None
    factor = result.speedup or (best.median or 0.0) / base
    return Finding(
        rule="tune",
        severity=Severity.WARNING if factor >= TUNED_WARNING else Severity.INFO,
        title=f"{best.change}={best.value} makes the job {factor:.2f}x faster (measured)",
        explanation=f"stepdoctor tune ran the job with one change at a time: {result.reason}.",
        evidence=(
            Evidence(metric=f"baseline ({result.unit})", value=round(base, 2), source="tune"),
            Evidence(
                metric=f"{best.change}={best.value} ({result.unit})",
                value=round(best.median or 0.0, 2),
                source="tune",
            ),
        ),
        speedup=_measured(
            best,
            base,
            factor,
            f"stepdoctor tune ({result.unit}, baseline {base:,.0f}; {_curve(list(result.trials))})",
        ),
        fix=Fix(summary=f"Set {best.change} to {best.value} in the job."),
    )


#: A fix ``run --verify`` measured is recommended only when its median gain is at least this
#: (fournex's 8% acceptance threshold, as ``tune``) and every round was faster.
VERIFY_MIN_GAIN = 0.08


def attach_verify(report: Report, trials: Sequence[FixTrial], notes: Sequence[str]) -> Report:
    """Give each finding the best of the fixes ``run --verify`` measured for it.

    A fix whose median gain is at least ``VERIFY_MIN_GAIN`` with every round faster replaces
    the model with its measurement, and the fix names it. Otherwise the finding is demoted to
    info with the measurement; when every trial of its fix was slower than the job as it is,
    its fix is replaced: a change measured slower is never recommended.
    """
    by_rule: dict[str, list[FixTrial]] = {}
    for t in trials:
        if t.median is not None:
            by_rule.setdefault(t.rule, []).append(t)
    out = []
    for finding in report.findings:
        mine = by_rule.get(finding.rule)
        if not mine:
            out.append(finding)
            continue
        best = max(mine, key=lambda t: t.median or 0.0)
        factor = best.median or 0.0
        tried = "; ".join(f"{t.change}: {t.median:.2f}x" for t in mine)
        speedup = Speedup.measured(
            factor,
            f"run --verify, {best.change}: {best.basis} (tried: {tried})",
            (min(best.factors), max(best.factors)) if len(best.factors) > 1 else None,
        )
        if factor >= 1 + VERIFY_MIN_GAIN and min(best.factors) > 1:
            won = f"Measured: {best.change} makes the job {factor:.2f}x as fast."
            out.append(judged(finding, speedup, won=won))
        elif factor < 1:
            out.append(
                judged(
                    finding,
                    speedup,
                    lost=f"Measured after the job: every fix tried was slower ({tried}).",
                    keep="Keep the job as it is: run --verify measured "
                    f"{tried} of the job's speed, so none of these changes is recommended.",
                )
            )
        else:
            lost = f"Measured after the job: no gain beyond noise ({tried})."
            out.append(judged(finding, speedup, lost=lost))
    findings = rank(out)
    return dataclasses.replace(
        report,
        findings=tuple(findings),
        fix_trials=tuple(trials),
        warnings=(*report.warnings, *(f"verify: {n}" for n in notes)),
        measure_with=measure_command(report.meta.command, findings),
    )


#: What ``tune`` sweeps to measure each rule's fix (``tune --only``).
_TUNE_DIMENSIONS = {
    "input-bound": ("workers", "loader"),
    "small-batch": ("batch",),
    "thread-oversubscription": ("threads",),
    "shared-model-threads": ("threads",),
}


def measure_command(
    command: Sequence[str], findings: Sequence[Finding], *, torch_job: bool = True
) -> str:
    """The command that would measure the modelled figures of the findings worth acting on:
    ``stepdoctor tune --only ...`` for the settings tune sweeps, else ``stepdoctor run
    --verify``; empty when every such figure was measured, the script is not known, or the
    job trains no torch model (``torch_job``: both try the fixes on the job's torch model and
    loader)."""
    from stepdoctor.experiments.verify import TRIALS

    if not torch_job:
        return ""

    modelled = [
        f
        for f in findings
        if f.severity is not Severity.INFO
        and f.speedup.kind is SpeedupKind.MODELLED
        and (f.rule in _TUNE_DIMENSIONS or f.rule in TRIALS)
    ]
    if not modelled:
        return ""
    script = _script_of(command)
    if not script:
        return ""
    dims = sorted({d for f in modelled for d in _TUNE_DIMENSIONS.get(f.rule, ())})
    if dims and all(f.rule in _TUNE_DIMENSIONS for f in modelled):
        return shlex.join(["stepdoctor", "tune", "--only", ",".join(dims), *script])
    return shlex.join(["stepdoctor", "run", "--verify", *script])


def _script_of(command: Sequence[str]) -> list[str]:
    """The script and its arguments from a run's command line."""
    parts = list(command)
    if parts[:2] == ["stepdoctor", "run"]:
        parts = parts[2:]
    return parts if parts and parts[0].endswith(".py") else []
