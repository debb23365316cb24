"""Report -> terminal text with rich (deterministic at a fixed width without colour)."""

from __future__ import annotations

import io
from collections.abc import Sequence

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from stepdoctor.model import BoundVerdict, Checkup, Finding, Report, Severity
from stepdoctor.render.names import (
    SEVERITY_LABELS,
    allocation_words,
    phase_label,
    site_words,
    speedup_words,
)

__all__ = ["render_checkup_text", "render_findings", "render_text"]

_STYLES = {Severity.CRITICAL: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
_BAR_WIDTH = 30


def _console(buffer: io.StringIO, width: int, color: bool) -> Console:
    return Console(
        file=buffer,
        width=width,
        color_system="auto" if color else None,
        force_terminal=color,
        no_color=not color,
        highlight=False,
    )


def render_text(report: Report, *, width: int = 100, color: bool = False) -> str:
    """Return the report as terminal text ``width`` columns wide."""
    buffer = io.StringIO()
    console = _console(buffer, width, color)
    if report.outcome:  # a failed job says so before anything else
        console.print(Text(report.outcome, style="bold red"))
    if report.evidence_note:
        console.print(Text(_sentence(report.evidence_note), style="yellow"))
    console.print(_summary(report))
    if report.summary.phase_share:
        console.print(_phases(report))
    for v in report.experiments:
        console.print(_experiment(v))
    console.print(_findings(report))
    for warning in report.warnings:
        console.print(Text(f"note: {warning}", style="dim"))
    if report.measure_with:
        console.print(Text(f"Modelled speed-ups above: measure them with  {report.measure_with}"))
    return buffer.getvalue()


def _summary(report: Report) -> Panel:
    s = report.summary
    lines = [
        f"steps: {s.steps}   wall: {s.wall_s:.1f} s   measured: {s.measured_s:.1f} s",
        "samples/s: "
        + ("n/a" if s.samples_per_sec is None else f"{s.samples_per_sec:,.1f}")
        + "   batches/s: "
        + ("n/a" if s.batches_per_sec is None else f"{s.batches_per_sec:,.1f}")
        + "   step: "
        + ("n/a" if s.mean_step_ms is None else f"{s.mean_step_ms:,.2f} ms")
        + f"   GC: {s.gc_share:.1%}",
    ]
    if s.batch_note:
        lines.append(s.batch_note)
    if s.timing_note:
        lines.append(s.timing_note)
    if s.step_basis:
        lines.append(f"how steps were counted: {s.step_basis}")
    if s.evaluation_calls or s.evaluation_s:
        # the calls are the model's as torch's hooks count them: none where they see no model
        calls = f", {s.evaluation_calls} calls" if s.evaluation_calls else ""
        lines.append(
            f"evaluation: {s.evaluation_share:.0%} of the steps' wall time "
            f"({s.evaluation_s:,.1f} s{calls}), left out of the step figures"
        )
    if s.warmup_note:
        lines.append(s.warmup_note)
    if s.profiled_note:
        lines.append(s.profiled_note)
    if s.monitor_cpu_share is not None:
        lines.append(f"stepdoctor's own monitor thread: {s.monitor_cpu_share:.1%} of a core")
    if report.end_status and report.end_status != "ok":
        lines.append(f"job ended: {report.end_status} (exit code {report.exit_code})")
    return Panel("\n".join(lines), title="stepdoctor", title_align="left")


def _experiment(v: BoundVerdict) -> Text:
    achieved = "" if v.achieved_per_sec is None else f"; the job: {v.achieved_per_sec:,.1f}"
    verdicts = {
        "input": "bound by its input (the loader alone is the slower part)",
        "compute": "bound by compute (the model alone is the slower part)",
        "balanced": "balanced (within the noise margin of each other)",
    }
    return Text(
        f"Measured ({v.unit}): data-only {v.data_rate:,.1f}, compute-only {v.compute_rate:,.1f}"
        f"{achieved} -> {verdicts.get(v.bound, v.bound)}; ceiling {v.ceiling_per_sec:,.1f}"
    )


def _phases(report: Report) -> Table:
    table = Table(
        title="Where a step's time goes",
        title_justify="left",
        show_edge=False,
        box=None,
        pad_edge=False,
    )
    table.add_column("phase")
    table.add_column("share", justify="right")
    table.add_column("", no_wrap=True)
    for name, share in report.summary.phase_share.items():
        if share < 0.0005:
            continue
        bar = "█" * max(1, round(share * _BAR_WIDTH))
        table.add_row(phase_label(name), f"{share:.1%}", bar)
    return table


def _findings(report: Report) -> Group | Text:
    if report.failed:
        if not report.findings:
            return Text(
                "No finding about the part of the job that ran; the job did not end normally, "
                "so this is no all-clear."
            )
        return _finding_group(
            report.findings,
            "Findings about the part of the job that ran, most important first:",
            cwd=report.meta.cwd,
        )
    if report.evidence_note and not report.findings:
        return Text(
            f"Nothing above the rules' thresholds in the {report.summary.steps} step(s) "
            "recorded: too few to call the job healthy."
        )
    return _finding_group(report.findings, cwd=report.meta.cwd)


def _sentence(text: str) -> str:
    """``text`` as a sentence: capitalised, with a full stop."""
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


def _finding_group(
    findings: Sequence[Finding], heading: str = "Findings, most important first:", cwd: str = ""
) -> Group | Text:
    if not findings:
        return Text("No problems found: nothing above the rules' thresholds.")
    parts: list[Text | Panel] = [Text(heading)]
    for rank, finding in enumerate(findings, start=1):
        parts.append(_finding(rank, finding, cwd))
    return Group(*parts)


def render_findings(
    findings: Sequence[Finding],
    *,
    width: int = 100,
    color: bool = False,
    heading: str = "Findings, most important first:",
) -> str:
    """Ranked findings alone as terminal text (``stepdoctor trace``, a job's ranks)."""
    buffer = io.StringIO()
    _console(buffer, width, color).print(_finding_group(findings, heading))
    return buffer.getvalue()


def _finding(rank: int, f: Finding, cwd: str = "") -> Panel:
    body = Text()
    body.append(f.explanation + "\n")
    for e in f.evidence:
        unit = f" {e.unit}" if e.unit and e.unit != "share" else ""
        if e.value is None or e.value == "":
            value = "n/a"  # a setting left at its default, a fact not known
        elif e.unit == "share" and isinstance(e.value, float):
            value = f"{e.value:.1%}"
        else:
            value = f"{e.value}{unit}"
        limit = ""
        if e.threshold is not None:
            limit = (
                f" (threshold {e.threshold:.0%})"
                if e.unit == "share"
                else (f" (threshold {e.threshold}{unit})")
            )
        body.append(f"  • {e.metric}: {value}{limit}\n", style="dim")
    if f.where or f.allocated_at:
        body.append("Where:\n")
        for site in f.where:
            body.append(f"  • {site_words(site, cwd)}\n")
        for alloc in f.allocated_at:
            body.append(f"  • {allocation_words(alloc, cwd)}\n")
    body.append(f"Speed-up: {speedup_words(f.speedup, f.modelled)}\n")
    body.append(f"Fix: {f.fix.summary}")
    if f.fix.snippet:
        body.append("\n" + "\n".join("    " + line for line in f.fix.snippet.splitlines()))
    title = f"{rank}. [{SEVERITY_LABELS[f.severity]}] {f.title}  ({f.rule})"
    return Panel(body, title=Text(title, style=_STYLES[f.severity]), title_align="left")


_STATUS_STYLES = {
    "ok": "green",
    "info": "cyan",
    "warning": "yellow",
    "critical": "bold red",
    "skipped": "dim",
}
#: Facts in the doctor's headline, with their labels.
_HEADLINE = (
    ("python.version", "Python"),
    ("torch.version", "torch"),
    ("torch.cuda_build", "CUDA build"),
    ("cpu.brand", "CPU"),
    ("torch.cpu_capability", "torch CPU kernels"),
    ("cpu.affinity", "usable cores"),
    ("gpu.names", "GPUs"),
)


def render_checkup_text(checkup: Checkup, *, width: int = 100, color: bool = False) -> str:
    """Return the doctor's answer: headline facts, one row per check, findings, all facts."""
    buffer = io.StringIO()
    console = _console(buffer, width, color)
    facts = {f.key: f.value for f in checkup.facts}
    head = [f"{label}: {facts[key]}" for key, label in _HEADLINE if facts.get(key) is not None]
    memory = facts.get("mem.total_bytes")
    if isinstance(memory, int):
        head.append(f"memory: {memory / 2**30:.1f} GiB")
    if not facts.get("gpu.count") and not facts.get("gpu.device_nodes"):
        head.append("GPUs: none found (the GPU checks do not apply)")
    console.print(
        Panel("\n".join(head), title="stepdoctor doctor", title_align="left", expand=True)
    )
    table = Table(show_edge=False, box=None, pad_edge=False, title_justify="left")
    table.add_column("status", no_wrap=True)
    table.add_column("check", no_wrap=True)
    table.add_column("finding and fix")
    for check in checkup.checks:
        mine = [f for f in checkup.findings if f.rule == check.rule]
        detail = "; ".join(f"{f.title}: {f.fix.summary}" for f in mine) or check.reason
        table.add_row(
            Text(check.status, style=_STATUS_STYLES.get(check.status, "")),
            check.rule,
            detail,
        )
    console.print(table)
    if checkup.findings:
        console.print(Text("\nDetails:"))
        for rank, finding in enumerate(checkup.findings, start=1):
            console.print(_finding(rank, finding))
    facts_table = Table(
        title="Facts", title_justify="left", show_edge=False, box=None, pad_edge=False
    )
    facts_table.add_column("fact")
    facts_table.add_column("value")
    facts_table.add_column("source", style="dim")
    for fact in checkup.facts:
        facts_table.add_row(
            fact.key, "unset" if fact.value is None else str(fact.value), fact.source
        )
    console.print(facts_table)
    console.print(Text(f"checked in {checkup.duration_s:.1f} s", style="dim"))
    return buffer.getvalue()
