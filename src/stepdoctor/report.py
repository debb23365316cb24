"""Build the report of a run: summary, ranked findings (with measurements), skipped rules."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from stepdoctor.errors import TraceError
from stepdoctor.model import (
    SCHEMA_VERSION,
    BoundVerdict,
    Evidence,
    Finding,
    Measurement,
    Report,
    RunEnd,
    RunMeta,
    RunRecord,
    Severity,
    Summary,
    TraceSummary,
    TuneResult,
)
from stepdoctor.rules import RULES, RuleContext, rank, run_rules, temper, thin_evidence
from stepdoctor.traces import analyse_paths

__all__ = [
    "attach_measurements",
    "attach_tune",
    "build_report",
    "fold_trace",
    "merge_duplicates",
    "outcome",
    "trace_findings",
    "trace_of_run",
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
    findings = attach_measurements(findings, record.experiments, ctx.summary)
    thin = thin_evidence(len(ctx.steps), ctx.summary.measured_s)
    findings = rank([
        temper(f, measured_s=ctx.summary.measured_s, thin=bool(thin), timed=_timed(f))
        for f in merge_duplicates(findings)
    ])  # fmt: skip
    failed, said = outcome(record, ctx.summary)
    warnings = list(record.warnings)
    warnings += [f"stepdoctor: {n.message}" for n in record.notices]
    if not record.steps:
        warnings.append(
            "no steps were recorded: no optimizer step, model call or doc.step() was seen"
        )
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
    )


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
    if end is not None and not _failed(end):
        return False, ""
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
    return (f.severity, f.explanation, f.evidence, f.speedup, f.fix, f.measurement, f.span_ns)


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
                finding = dataclasses.replace(
                    finding,
                    measurement=Measurement(
                        factor=max(1.0, compute / achieved),
                        method=f"measured ceiling with the input out of the way: {measured}",
                    ),
                )
            else:
                finding = dataclasses.replace(
                    finding,
                    severity=Severity.INFO,
                    explanation=finding.explanation
                    + f" Measured: the loader alone is not the limit ({measured}); the "
                    "waits come from how batches are handed over (worker start-up each "
                    "epoch, per-batch overhead), not from the loader's throughput.",
                    measurement=Measurement(
                        factor=max(1.0, v.ceiling_per_sec / achieved),
                        method=f"measured ceiling (the slower part alone): {measured}",
                    ),
                )
        out.append(finding)
    return rank(out)


def _with_achieved(v: BoundVerdict, summary: Summary) -> BoundVerdict:
    achieved = summary.samples_per_sec if v.unit == "samples/s" else summary.batches_per_sec
    return dataclasses.replace(v, achieved_per_sec=achieved)


def attach_tune(report: Report, result: TuneResult) -> Report:
    """Give the findings of the tuned job's baseline run what the sweep measured: the best
    change of the kind the finding recommends (its measured speed-up), or, when none of
    those beat the baseline beyond noise, a downgrade that says so."""
    base = result.baseline.median
    if not base:
        return report
    out = []
    for finding in report.findings:
        kinds = _TUNE_EVIDENCE.get(finding.rule)
        trials = [t for t in result.trials if kinds and t.change in kinds and t.median]
        if not trials:
            out.append(finding)
            continue
        curve = ", ".join(
            f"{t.change}={t.value}: {t.median:,.0f}" for t in trials if t.median is not None
        )
        best = max(trials, key=lambda t: t.median or 0.0)
        factor = (best.median or 0.0) / base
        accepted = result.best is not None and result.best.change in (kinds or ())
        method = f"measured by stepdoctor tune ({result.unit}, baseline {base:,.0f}; {curve})"
        if accepted and result.best is not None:
            factor = result.speedup or factor
            method = f"best: {result.best.change}={result.best.value}; " + method
            out.append(
                dataclasses.replace(finding, measurement=Measurement(factor=factor, method=method))
            )
        else:
            out.append(
                dataclasses.replace(
                    finding,
                    severity=Severity.INFO,
                    explanation=finding.explanation
                    + " Measured: none of the changes this fix suggests was faster beyond "
                    f"noise ({curve}; baseline {base:,.0f} {result.unit}).",
                    measurement=Measurement(factor=max(factor, 0.0), method=method),
                )
            )
    return dataclasses.replace(report, findings=tuple(rank(out)))


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
