"""One finding per cause: a finding that is another's symptom is folded into that one.

A rule that sees a symptom (slow steps) names the finding on its cause with the evidence
``SYMPTOM_OF`` (the cause's rule id): ``step-outliers`` names ``gc-pauses`` when a garbage
collection ran in the slow steps, ``frequent-evaluation`` when evaluation grew in them, the
job's helper processes, other processes or threads sharing a model when they explain them.
Where that finding is in the report at least as severe as the symptom, the symptom becomes its
evidence (the finding keeps its severity, speed-up and fix, which act on the cause) and is no
finding of its own, so it never ranks above its cause. Where it is not there, or its rule
judged it milder (frequent-evaluation is info for no-grad calls outside ``model.eval()``,
sampling more likely), the symptom stays a finding and loses the pointer: folding it would
either drop its severity or overrule that judgement.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from stepdoctor.model import Evidence, Finding

__all__ = ["SYMPTOM_OF", "fold_symptoms", "symptom_evidence"]

#: The evidence by which a finding names the rule whose finding is on its cause.
SYMPTOM_OF = "symptom of"


def fold_symptoms(findings: Sequence[Finding]) -> list[Finding]:
    """Return ``findings`` with each symptom folded into the finding on its cause (module
    doc), the order kept otherwise (the report ranks them after)."""
    causes: dict[str, int] = {}  # rule -> the index of its most severe finding
    for i, f in enumerate(findings):
        if _cause_of(f) is None and (
            f.rule not in causes or f.severity.rank < findings[causes[f.rule]].severity.rank
        ):
            causes[f.rule] = i
    out: list[Finding | None] = list(findings)
    for i, f in enumerate(findings):
        cause = _cause_of(f)
        if cause is None:
            continue
        kept = tuple(e for e in f.evidence if e.metric != SYMPTOM_OF)
        at = causes.get(cause)
        host = None if at is None else out[at]
        if at is None or host is None or host.severity.rank > f.severity.rank:
            out[i] = dataclasses.replace(f, evidence=kept)
            continue
        out[at] = _with_symptom(host, dataclasses.replace(f, evidence=kept))
        out[i] = None
    return [f for f in out if f is not None]


def _cause_of(finding: Finding) -> str | None:
    for e in finding.evidence:
        if e.metric == SYMPTOM_OF and isinstance(e.value, str):
            return e.value
    return None


def _with_symptom(cause: Finding, symptom: Finding) -> Finding:
    """``cause`` with ``symptom`` as its evidence: the symptom's title in its explanation, its
    evidence (each metric marked as the symptom's)."""
    return dataclasses.replace(
        cause,
        explanation=(
            f"{cause.explanation} Its symptom: {symptom.title[0].lower()}{symptom.title[1:]} "
            '(the evidence marked "symptom").'
        ),
        evidence=(
            *cause.evidence,
            *(dataclasses.replace(e, metric=f"symptom: {e.metric}") for e in symptom.evidence),
        ),
    )


def symptom_evidence(cause_rule: str, why: str) -> Evidence:
    """The evidence by which a finding names ``cause_rule`` as its cause (``why``: what
    showed it)."""
    return Evidence(metric=SYMPTOM_OF, value=cause_rule, source=why)
