"""Build the report of a run: summary, ranked findings (with measurements), skipped rules."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
from collections.abc import Sequence
from pathlib import Path

from stepdoctor.errors import TraceError
from stepdoctor.model import (
    SCHEMA_VERSION,
    BoundVerdict,
    Evidence,
    Finding,
    Fix,
    FixTrial,
    Report,
    RunEnd,
    RunMeta,
    RunRecord,
    Severity,
    Speedup,
    SpeedupKind,
    Summary,
    TraceSummary,
    TuneResult,
    TuneTrial,
    from_jsonable,
    to_jsonable,
)
from stepdoctor.rules import (
    RULES,
    RuleContext,
    in_framework_terms,
    rank,
    run_rules,
    temper,
    thin_evidence,
)
from stepdoctor.rules.where import stack_counts
from stepdoctor.traces import analyse_paths

__all__ = [
    "attach_measurements",
    "attach_tune",
    "attach_verify",
    "build_report",
    "fold_trace",
    "measure_command",
    "merge_duplicates",
    "outcome",
    "trace_findings",
    "trace_of_run",
    "verify_of_run",
    "write_verify",
]

#: Which tuning changes measure which finding.
_TUNE_EVIDENCE = {
    "input-bound": ("num_workers", "pin_memory", "prefetch_factor", "persistent_workers"),
    "small-batch": ("batch_size",),
    "thread-oversubscription": ("threads",),
    "shared-model-threads": ("threads",),
}


def build_report(record: RunRecord, context: RuleContext | None = None) -> Report:
    """Run every rule on ``record`` and return the report (findings ranked); ``context``: the
    record's ``RuleContext`` where the caller has one (its summary is then not made again)."""
    ctx = RuleContext(record) if context is None else context
    findings, skipped = run_rules(ctx)
    findings = in_framework_terms(record, findings)
    findings = attach_measurements(findings, record.experiments, ctx.summary)
    # a GC log alone has no steps: its rules judge its own span (``_over``)
    thin = (
        ""
        if record.from_logs and not record.steps
        else thin_evidence(len(ctx.steps), ctx.summary.measured_s)
    )
    findings = rank([
        temper(f, measured_s=_over(f, ctx.summary, record), thin=bool(thin), timed=_timed(f))
        for f in merge_duplicates(findings)
    ])  # fmt: skip
    failed, said = outcome(record, ctx.summary)
    warnings = list(record.warnings)
    warnings += [f"stepdoctor: {n.message}" for n in record.notices]
    if not record.steps and not record.from_logs:
        warnings.append(
            "no steps were recorded: no optimizer step, model call or doc.step() was seen"
        )
    frames, stacks, counts = stack_counts(record, ctx.stack_index)
    return Report(
        schema_version=SCHEMA_VERSION,
        meta=record.meta,
        summary=ctx.summary,
        findings=tuple(findings),
        skipped=tuple(skipped),
        warnings=tuple(warnings),
        end_status=None if record.end is None else record.end.status,
        exit_code=None if record.end is None else record.end.exit_code,
        experiments=tuple(_with_achieved(v, ctx.summary) for v in record.experiments),
        failed=failed,
        outcome=said,
        error="" if record.end is None else record.end.error,
        error_at="" if record.end is None else _where(record.end.error_at, record.meta.cwd),
        evidence_note=thin,
        measure_with=measure_command(record.meta.command, findings),
        frames=frames,
        stacks=stacks,
        stack_counts=counts,
    )


#: Findings whose speed-up is over the steps' wall time, evaluation included (the measured
#: seconds leave evaluation out).
_OF_WALL_TIME = frozenset({"frequent-evaluation"})


def _over(finding: Finding, summary: Summary, record: RunRecord) -> float:
    """The seconds over which ``finding``'s fix saves its share (a JVM's GC log's: its
    span)."""
    registered = RULES.get(finding.rule)
    if registered is not None and registered.scope == "logs" and record.jvm_gc:
        return max(log.duration_s for log in record.jvm_gc)
    extra = summary.evaluation_s if finding.rule in _OF_WALL_TIME else 0.0
    return summary.measured_s + (extra or 0.0)


def _timed(finding: Finding) -> bool:
    """Whether ``finding`` is graded from the run's timings (its rule's ``timed``)."""
    registered = RULES.get(finding.rule)
    return registered is not None and registered.timed


#: How a job that did not end normally ended, by ``RunEnd.status`` (exit codes vary).
_ENDINGS = {
    "exception": "The job failed",
    "exit": "The job failed",
    "interrupted": "The job was interrupted",
}


def outcome(record: RunRecord, summary: Summary) -> tuple[bool, str]:
    """Return whether the job failed, and (when it did) the report's first words: how it
    ended (exit code, exception, where in the job's code) and what the findings cover.

    A job failed when it raised, exited with a non-zero code, was interrupted (Ctrl-C), or
    left no end in its record (killed: by a signal, for lack of memory). A tuning trial's step
    limit (``stopped``) and ``sys.exit(0)`` are normal ends.
    """
    end = record.end
    if record.from_logs or (end is not None and not _failed(end)):
        return False, ""  # a job read from its logs: how it ended is not known
    ran = f"{summary.steps} step(s) in {summary.wall_s:.1f} s"
    cover = f"The findings are about the part of the job that ran ({ran}), not a whole run."
    if end is None:
        return True, (
            "The job did not finish: its record has no end, so the process was killed (by a "
            "signal, or for lack of memory) or is still running; no exit code was recorded. "
            + cover
        )
    where = _where(end.error_at, record.meta.cwd)
    if end.status == "exit":
        what = f"SystemExit: {end.error}" if end.error else f"sys.exit({end.exit_code})"
    elif end.status == "interrupted":
        what = "KeyboardInterrupt (Ctrl-C or SIGINT)"
    else:
        what = _first_line(end.error) or "an exception"
    lead = _ENDINGS.get(end.status, f"The job ended with status {end.status!r}")
    at = f", raised at {where}" if where else ""
    return True, f"{lead} (exit code {end.exit_code}): {what}{at}. {cover}"


def _failed(end: RunEnd) -> bool:
    if end.status in ("ok", "stopped"):
        return False
    return end.status != "exit" or end.exit_code != 0


#: Longest exception message the outcome line quotes (the whole one is in ``Report.error``).
_MAX_ERROR_CHARS = 200


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= _MAX_ERROR_CHARS else line[: _MAX_ERROR_CHARS - 3] + "..."


def _where(error_at: str, cwd: str) -> str:
    """``error_at`` (``path:line``) with the path relative to the job's folder when inside it."""
    path, sep, line = error_at.rpartition(":")
    if not sep or not path or not cwd:
        return error_at
    try:
        relative = os.path.relpath(path, cwd)
    except ValueError:  # another drive (Windows)
        return error_at
    return error_at if relative.startswith(os.pardir) else f"{relative}:{line}"


def merge_duplicates(findings: list[Finding]) -> list[Finding]:
    """One finding per cause: findings of the same rule about the same subject (its title, and
    the trace ranks) are one, the most severe (then largest speed-up) standing for the others;
    when they differ, its evidence counts how many times it was found.

    The rules give one finding per subject; this guards the report against a rule that loops
    over models, loaders or calls seeing one subject twice.
    """
    groups: dict[tuple[str, str, tuple[int, ...]], list[Finding]] = {}
    for f in findings:
        groups.setdefault((f.rule, f.title, f.ranks), []).append(f)
    out = []
    for group in groups.values():
        best = rank(group)[0]
        distinct = len(set(map(_identity, group)))
        if distinct > 1:
            best = dataclasses.replace(
                best,
                evidence=(
                    *best.evidence,
                    Evidence(metric="times found in this run", value=len(group)),
                ),
            )
        out.append(best)
    return out


def _identity(f: Finding) -> tuple[object, ...]:
    return (f.severity, f.explanation, f.evidence, f.speedup, f.fix, f.modelled, f.span_ns)


def attach_measurements(
    findings: list[Finding], experiments: tuple[BoundVerdict, ...], summary: Summary
) -> list[Finding]:
    """Give ``input-bound`` the measured ceiling, or downgrade it when the measurement shows
    the loader is not what limits the job; re-rank."""
    if not experiments:
        return findings
    v = _with_achieved(experiments[-1], summary)
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


def _with_achieved(v: BoundVerdict, summary: Summary) -> BoundVerdict:
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
            loud = factor >= TUNED_WARNING and finding.severity is Severity.INFO
            out.append(
                finding.measured_as(
                    _measured(winner, base, result.speedup, basis),
                    severity=Severity.WARNING if loud else finding.severity,
                    fix=Fix(
                        summary=f"Measured best: {winner.change}={winner.value}, "
                        f"{factor:.2f}x the job's throughput. " + finding.fix.summary,
                        snippet=finding.fix.snippet,
                    ),
                )
            )
            continue
        factor = (best.median or 0.0) / base
        verdict = "slower than the job as it is" if factor < 1 else "not faster beyond noise"
        out.append(
            finding.measured_as(
                _measured(best, base, factor, basis),
                severity=Severity.INFO,
                explanation=finding.explanation
                + f" Measured: every change this finding would suggest was {verdict} "
                f"({curve}; baseline {base:,.0f} {result.unit}).",
                fix=Fix(
                    summary=f"Keep the job's settings: stepdoctor tune measured {curve} against "
                    f"{base:,.0f} {result.unit} as the job is, so none of these changes is "
                    "recommended."
                ),
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
            loud = factor >= TUNED_WARNING and finding.severity is Severity.INFO
            out.append(
                finding.measured_as(
                    speedup,
                    severity=Severity.WARNING if loud else finding.severity,
                    fix=Fix(
                        summary=f"Measured: {best.change} makes the job {factor:.2f}x as fast. "
                        + finding.fix.summary,
                        snippet=finding.fix.snippet,
                    ),
                )
            )
        elif factor < 1:
            out.append(
                finding.measured_as(
                    speedup,
                    severity=Severity.INFO,
                    explanation=finding.explanation
                    + f" Measured after the job: every fix tried was slower ({tried}).",
                    fix=Fix(
                        summary="Keep the job as it is: run --verify measured "
                        f"{tried} of the job's speed, so none of these changes is recommended."
                    ),
                )
            )
        else:
            out.append(
                finding.measured_as(
                    speedup,
                    severity=Severity.INFO,
                    explanation=finding.explanation
                    + f" Measured after the job: no gain beyond noise ({tried}).",
                )
            )
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


def measure_command(command: Sequence[str], findings: Sequence[Finding]) -> str:
    """The command that would measure the modelled figures of the findings worth acting on:
    ``stepdoctor tune --only ...`` for the settings tune sweeps, else ``stepdoctor run
    --verify``; empty when every such figure was measured (or the script is not known)."""
    from stepdoctor.experiments.verify import TRIALS

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


def trace_findings(trace: TraceSummary, meta: RunMeta) -> list[Finding]:
    """The trace rules' findings on an analysis, ranked (``meta``: the run it belongs to)."""
    found, _ = run_rules(RuleContext(RunRecord(meta=meta), trace=trace), scopes=("trace",))
    return found


def fold_trace(report: Report, trace: TraceSummary) -> Report:
    """Add a profiler trace's findings (ranked with the run's) and warnings to the report."""
    found = trace_findings(trace, report.meta)
    return dataclasses.replace(
        report,
        findings=tuple(rank(merge_duplicates([*report.findings, *found]))),
        warnings=(*report.warnings, *trace.warnings),
    )


#: Where ``stepdoctor run --trace`` writes the profiler trace, inside the run folder.
TRACE_FOLDER = "trace"


def trace_of_run(run_path: Path) -> tuple[TraceSummary | None, str | None]:
    """The analysis of the profiler trace a run captured (``run --trace``), if it has one:
    ``(summary, None)``, ``(None, None)`` without a trace, ``(None, why)`` when it cannot be
    read."""
    folder = (run_path if run_path.is_dir() else run_path.parent) / TRACE_FOLDER
    if not folder.is_dir() or not any(folder.iterdir()):
        return None, None
    try:
        return analyse_paths([folder]), None
    except TraceError as exc:
        return None, f"the run's profiler trace could not be read: {exc}"


#: Where ``stepdoctor run --verify`` writes the fixes it tried, inside the run folder.
VERIFY_FILE = "verify.json"


def write_verify(run_dir: Path, trials: Sequence[FixTrial], notes: Sequence[str]) -> Path:
    """Keep what ``run --verify`` measured beside the run record."""
    path = run_dir / VERIFY_FILE
    data = {"trials": [to_jsonable(t) for t in trials], "notes": list(notes)}
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return path


def verify_of_run(run_path: Path) -> tuple[list[FixTrial], list[str]] | None:
    """What ``run --verify`` measured for a run, if it did: ``(trials, notes)``; a file that
    cannot be read gives no trials and a note saying so."""
    path = (run_path if run_path.is_dir() else run_path.parent) / VERIFY_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        trials = [from_jsonable(FixTrial, t) for t in data["trials"]]
        notes = [str(n) for n in data.get("notes", [])]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return [], [f"{path.name} could not be read: {exc}"]
    return trials, notes
