"""The one rule registry: ``@rule`` registers a pure function of a ``RuleContext``."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from dataclasses import dataclass

from stepdoctor.model import Finding, Severity, SkippedRule, SpeedupKind
from stepdoctor.rules._traces import group_ranks
from stepdoctor.rules.context import RuleContext
from stepdoctor.rules.where import phase_sites

__all__ = ["RULES", "SCOPES", "Rule", "rule", "run_rules"]

RuleFunc = Callable[[RuleContext], list[Finding]]

#: The architectures whose CPU flags (AVX2, AVX-512) the CPU checks read.
_X86 = ("x86_64", "amd64", "i386", "i686")

#: What a rule may require, and how to tell it is there.
_REQUIREMENTS: dict[str, tuple[Callable[[RuleContext], bool], str]] = {
    "steps": (lambda c: len(c.steps) > 0, "no steps were recorded after warm-up"),
    "phases": (
        lambda c: c.steps_split,
        "the steps were not split into phases (no data wait, forward, backward or optimizer "
        "was timed in them): what runs between steps cannot be told from the steps themselves",
    ),
    "system": (lambda c: len(c.system) > 0, "no system samples were recorded"),
    "env": (lambda c: len(c.record.env) > 0, "no environment facts were recorded"),
    "model": (lambda c: len(c.record.models) > 0, "no model was seen"),
    "cpu_flags": (
        lambda c: (
            c.record.env_value("cpu.avx2") is not None
            or str(c.record.env_value("cpu.arch")).lower() not in _X86
        ),
        "the CPU's flags were not read (py-cpuinfo gave none in time: see the probe.cpuinfo "
        "fact); run `stepdoctor doctor` again",
    ),
    "trace": (
        lambda c: c.trace is not None and any(r.temporal for r in c.trace.ranks),
        "no profiler trace with GPU events",
    ),
    "jvm_gc": (lambda c: len(c.record.jvm_gc) > 0, "no JVM GC log was given"),
    "dl4j": (lambda c: c.record.env_value("framework") == "dl4j", "no DL4J log was given"),
}


@dataclass(frozen=True, slots=True)
class Rule:
    """A registered rule."""

    id: str
    title: str
    requires: tuple[str, ...]
    doc: str
    func: RuleFunc
    scope: str = "run"
    where: tuple[str, ...] = ()
    """The phases whose sampled stacks say where its findings' time goes."""

    @property
    def timed(self) -> bool:
        """Whether the rule grades the run's timings (its steps or system samples): its
        findings are then only as firm as the run is long (``_severity.thin_evidence``)."""
        return self.scope == "run" or bool({"steps", "system"} & set(self.requires))

    def missing(self, ctx: RuleContext) -> str | None:
        """Return why the rule cannot run on ``ctx`` (None if it can)."""
        for need in self.requires:
            check, reason = _REQUIREMENTS[need]
            if not check(ctx):
                return reason
        return None


RULES: dict[str, Rule] = {}

#: What a rule judges: ``run`` (a watched run's steps and samples), ``env`` (the machine and
#: Python environment: ``stepdoctor doctor`` runs these) or ``model`` (a model's structure:
#: ``stepdoctor.lint`` runs these) or ``trace`` (a profiler trace's analysis: ``stepdoctor
#: trace`` runs these) or ``logs`` (a JVM job's DL4J and GC logs: ``stepdoctor logs``; only
#: run, and listed, for a record read from logs). A watched run runs the others.
SCOPES = ("run", "env", "model", "trace", "logs")


def rule(
    *,
    id: str,
    title: str,
    requires: tuple[str, ...] = ("steps",),
    scope: str = "run",
    doc: str = "",
    where: tuple[str, ...] = (),
) -> Callable[[RuleFunc], RuleFunc]:
    """Register a rule function under ``id``; its doc is the rule module's docstring.

    ``where``: the phases whose sampled stacks are the code its findings are about (each
    finding then shows their top functions, ``rules.where``)."""
    unknown = set(requires) - set(_REQUIREMENTS)
    if unknown:
        raise ValueError(f"rule {id}: unknown requirements {sorted(unknown)}")
    if scope not in SCOPES:
        raise ValueError(f"rule {id}: scope {scope!r} is not one of {SCOPES}")

    def register(func: RuleFunc) -> RuleFunc:
        if id in RULES:
            raise ValueError(f"rule {id!r} registered twice")
        module = sys.modules.get(func.__module__)
        module_doc = module.__doc__ if module is not None else None
        RULES[id] = Rule(
            id=id,
            title=title,
            requires=requires,
            doc=doc or module_doc or func.__doc__ or "",
            func=func,
            scope=scope,
            where=where,
        )
        return func

    return register


def run_rules(
    ctx: RuleContext, scopes: tuple[str, ...] = SCOPES
) -> tuple[list[Finding], list[SkippedRule]]:
    """Run the registered rules of ``scopes``; return the findings ranked and the rules
    skipped (with why)."""
    findings: list[Finding] = []
    skipped: list[SkippedRule] = []
    for r in RULES.values():
        if r.scope not in scopes or (r.scope == "logs" and not ctx.record.from_logs):
            continue
        reason = r.missing(ctx)
        if reason is not None:
            skipped.append(SkippedRule(rule=r.id, reason=reason))
            continue
        found = r.func(ctx)
        if r.where and found and not any(f.where for f in found):
            sites = phase_sites(ctx.record, r.where, span_ns=ctx.span_ns, index=ctx.stack_index)
            found = [dataclasses.replace(f, where=sites) for f in found]
        findings.extend(group_ranks(found) if r.scope == "trace" else found)
    return rank(findings), skipped


def rank(findings: list[Finding]) -> list[Finding]:
    """Order by the wall time each fix saves: its speed-up, measured where something measured
    it, else modelled, largest first, among the findings worth acting on (critical and
    warning), then the same among the info ones; ties by severity, then rule id. Critical
    findings with no figure (the job will fail: out of memory, the wrong device) come before
    all: no speed-up weighs against a job that does not finish. Savings under
    ``SMALL_SPEEDUP`` come after the larger ones, a finding with no figure first among them
    (its saving is unknown, theirs known to be small)."""
    return sorted(findings, key=_rank_key)


#: A speed-up under 1.1x is within what a job's runs vary by (issue 23: a finding claiming
#: more than 1.1x must hold; fournex accepts a tuning change from 8%): ranking by it would
#: rank by noise.
SMALL_SPEEDUP = 1.1


def _rank_key(f: Finding) -> tuple[int, int, int, float, int, str]:
    if f.severity is Severity.CRITICAL and f.speedup.kind is SpeedupKind.NONE:
        group = 0
    else:
        group = 2 if f.severity is Severity.INFO else 1
    known = f.speedup.kind is not SpeedupKind.NONE
    small = not known or f.speedup.factor < SMALL_SPEEDUP
    return group, int(small), int(known and small), -f.speedup.factor, f.severity.rank, f.rule
