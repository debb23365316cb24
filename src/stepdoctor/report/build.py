"""The report of a run: its summary, the rules' findings ranked (with what was measured),
the rules skipped, how the job ended; a profiler trace's findings folded in."""

from __future__ import annotations

import dataclasses
import os

from stepdoctor.model import (
    SCHEMA_VERSION,
    Evidence,
    Finding,
    Report,
    RunEnd,
    RunMeta,
    RunRecord,
    Summary,
    TraceSummary,
)
from stepdoctor.report.measured import attach_measurements, measure_command, with_achieved
from stepdoctor.rules import (
    RULES,
    RuleContext,
    in_framework_terms,
    keras_compiled,
    rank,
    run_rules,
    temper,
    tensorflow_loop,
    thin_evidence,
)
from stepdoctor.rules.symptoms import fold_symptoms
from stepdoctor.rules.where import stack_counts

__all__ = ["build_report", "fold_trace", "merge_duplicates", "outcome", "trace_findings"]


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
        for f in fold_symptoms(merge_duplicates(findings))
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
        experiments=tuple(with_achieved(v, ctx.summary) for v in record.experiments),
        failed=failed,
        outcome=said,
        error="" if record.end is None else record.end.error,
        error_at="" if record.end is None else _where(record.end.error_at, record.meta.cwd),
        evidence_note=thin,
        measure_with=measure_command(
            record.meta.command,
            findings,
            torch_job=not (keras_compiled(record) or tensorflow_loop(record)),
        ),
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
