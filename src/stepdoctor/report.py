"""Build the report of a run: summary, ranked findings (with measurements), skipped rules."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from stepdoctor.errors import TraceError
from stepdoctor.model import (
    SCHEMA_VERSION,
    BoundVerdict,
    Finding,
    Measurement,
    Report,
    RunMeta,
    RunRecord,
    Severity,
    Summary,
    TraceSummary,
    TuneResult,
)
from stepdoctor.rules import RuleContext, rank, run_rules
from stepdoctor.traces import analyse_paths

__all__ = [
    "attach_measurements",
    "attach_tune",
    "build_report",
    "fold_trace",
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
    )


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
        findings=tuple(rank([*report.findings, *found])),
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
