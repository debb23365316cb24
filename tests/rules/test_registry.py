from __future__ import annotations

import dataclasses

import pytest

from stepdoctor.model import Evidence, Finding, Fix, Severity, Speedup
from stepdoctor.rules import RULES, RuleContext, rank, rule, run_rules
from stepdoctor.rules.summary import split_warmup
from tests.builders import record, steps

EXPECTED = {
    "input-bound",
    "slow-callbacks",
    "eager-step",
    "frequent-evaluation",
    "checkpoint-stalls",
    "gc-pauses",
    "small-batch",
    "step-outliers",
    "memory-growth",
    "competing-processes",
    "helper-processes",
    "thread-oversubscription",
    "shared-model-threads",
    "float64",
    # issue 3: environment doctor and model lint
    "wrong-backend",
    "cudnn-disabled",
    "cpu-features",
    "memory-limits",
    "oversized-network",
    "cpu-fallback-ops",
    "tensor-core-alignment",
    "autograd-in-inference",
    # issue 5: profiler-trace rules
    "gpu-idle",
    "h2d-bound",
    "sync-bound",
    "launch-bound",
    "hot-kernel",
    "comm-bound",
    "stragglers",
    # issue 27: a JVM job's DL4J and GC logs
    "jvm-gc-overhead",
    "jvm-full-gcs",
    "jvm-gc-failures",
    "jvm-long-pauses",
    "dl4j-setup",
    # issue 36: live GPU verdicts
    "tensor-core-precision",
    "h2d-copies",
}


def test_every_rule_of_the_issue_is_registered_with_a_doc() -> None:
    assert set(RULES) == EXPECTED
    for r in RULES.values():
        assert "Detects" in r.doc and "Fix" in r.doc, r.id


def test_rules_missing_inputs_are_skipped_with_a_reason() -> None:
    findings, skipped = run_rules(RuleContext(record(())))
    assert findings == []
    reasons = {s.rule: s.reason for s in skipped}
    assert reasons["input-bound"] == "no steps were recorded after warm-up"
    assert "float64" not in reasons
    # the rules of a JVM job's logs are neither run nor listed for a watched run
    assert not {r for r in reasons if r.startswith(("jvm-", "dl4j-"))}


def _finding(rule_id: str, factor: float, severity: Severity) -> Finding:
    return Finding(
        rule=rule_id,
        severity=severity,
        title="t",
        explanation="e",
        evidence=(Evidence(metric="m", value=1),),
        speedup=Speedup(factor=factor, basis="m"),
        fix=Fix(summary="f"),
    )


def test_rank_by_time_saved_among_what_is_worth_acting_on() -> None:
    a = _finding("a", 1.2, Severity.CRITICAL)
    b = _finding("b", 2.0, Severity.WARNING)
    c = _finding("c", 1.2, Severity.WARNING)
    d = _finding("d", 3.0, Severity.INFO)
    e = dataclasses.replace(_finding("e", 1.0, Severity.CRITICAL), speedup=Speedup.none("crash"))
    f = _finding("f", 1.0, Severity.WARNING)
    # A job that will fail first; then the largest saving among critical and warning findings
    # (severity breaks ties); then info findings by their saving.
    assert [x.rule for x in rank([d, c, f, e, a, b])] == ["e", "b", "a", "c", "f", "d"]
    # Savings within a job's noise (under 1.1x) come after larger ones, a finding with no
    # figure first among them (unknown, not known to be small).
    g = _finding("g", 1.07, Severity.WARNING)
    h = dataclasses.replace(_finding("h", 1.0, Severity.WARNING), speedup=Speedup.none("?"))
    assert [x.rule for x in rank([g, h, c])] == ["c", "h", "g"]
    # A measured figure counts as the finding's saving.
    m = _finding("m", 1.1, Severity.WARNING).measured_as(Speedup.measured(2.5, "timed"))
    assert [x.rule for x in rank([b, m])] == ["m", "b"]


def test_duplicate_or_badly_declared_rules_are_refused() -> None:
    with pytest.raises(ValueError, match="twice"):
        rule(id="float64", title="again")(lambda ctx: [])
    with pytest.raises(ValueError, match="unknown requirements"):
        rule(id="x", title="x", requires=("gpu-magic",))


def test_warmup_skips_1000_samples_capped_at_a_fifth() -> None:
    assert split_warmup(steps(100, phases_ms={"forward": 1}, batch=32)) == 20
    assert split_warmup(steps(1000, phases_ms={"forward": 1}, batch=32)) == 32
    assert split_warmup(steps(1000, phases_ms={"forward": 1}, batch=None)) == 3
    assert split_warmup(steps(1, phases_ms={"forward": 1})) == 0
