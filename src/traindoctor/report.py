"""Build the report of a run: summary, ranked findings, skipped rules."""

from __future__ import annotations

from traindoctor.model import SCHEMA_VERSION, Report, RunRecord
from traindoctor.rules import RuleContext, run_rules

__all__ = ["build_report"]


def build_report(record: RunRecord) -> Report:
    """Run every rule on ``record`` and return the report (findings ranked)."""
    ctx = RuleContext(record)
    findings, skipped = run_rules(ctx)
    warnings = list(record.warnings)
    warnings += [f"traindoctor: {n.message}" for n in record.notices]
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
    )
