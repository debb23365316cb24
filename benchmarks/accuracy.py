"""How often stepdoctor names the planted fault, and how often it cries wolf, on this machine.

Runs every fault script of the scenario zoo (``tests/scenarios/_catalog.py``: the faults, and
the known misses for the record) once at each magnitude and once fixed (``ZOO_FIXED=1``), and
every healthy control ``--repeats`` times, each a real job under ``stepdoctor run``, one at a
time. Writes a Markdown page: per fault, the top finding about the job at each magnitude and
whether it is the planted rule, and the fixed twin's warning/critical findings (there should be
none); then each control's false alarms (a warning or critical finding about the job) and the
overall false-alarm rate. Findings about the machine (other processes' CPU) are left out, as
the zoo's tests leave them out, except for the fault that plants them.

    python benchmarks/accuracy.py [--repeats 10] [--out docs/accuracy.md]
    python benchmarks/accuracy.py --only input_bound,healthy_mlp --repeats 1 --out /tmp/a.md
"""

from __future__ import annotations

import argparse
import ast
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))

from tests.scenarios._catalog import CONTROLS, FAULTS, HEALTHY, KNOWN_MISSES, MAGNITUDES
from tests.scenarios._verdicts import LOUD, MACHINE_RULES

ZOO = Path(__file__).resolve().parents[1] / "tests" / "scenarios"
FIXED = "fixed"
#: A run that did not finish (its report could not be read) gets this instead of findings.
FAILED = "run failed"


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """One finding of a report, as the page shows it."""

    rule: str
    severity: str
    speedup: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """One job's outcome: its variant (a magnitude, ``fixed`` or ``control``) and findings."""

    script: str
    variant: str
    findings: tuple[Finding, ...] = ()
    error: str | None = None

    @property
    def loud(self) -> tuple[Finding, ...]:
        """Its warning and critical findings, in rank order."""
        return tuple(f for f in self.findings if f.severity in LOUD)


@dataclass(frozen=True, slots=True, kw_only=True)
class Fault:
    """A fault script: the rule it plants, what it plants, and its runs."""

    script: str
    rule: str
    plants: str
    runs: tuple[Run, ...]
    known_miss: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Machine:
    """Where and how the page was made."""

    command: str
    cores: int
    cpu: str
    torch: str
    date: str


def about_the_job(findings: Iterable[Finding], rule: str | None) -> tuple[Finding, ...]:
    """The findings a verdict reads: all of them for a fault about the machine, else those about
    the job."""
    if rule in MACHINE_RULES:
        return tuple(findings)
    return tuple(f for f in findings if f.rule not in MACHINE_RULES)


def top(run: Run) -> Finding | None:
    """The run's first finding, if any."""
    return run.findings[0] if run.findings else None


def caught(run: Run, rule: str) -> bool:
    """Whether ``rule`` tops the run's findings with warning or critical severity."""
    first = top(run)
    return run.error is None and first is not None and first.rule == rule and first.severity in LOUD


def clean(run: Run) -> bool:
    """Whether the run finished without a warning or critical finding."""
    return run.error is None and not run.loud


def _finding(f: Finding | None) -> tuple[str, str, str]:
    if f is None:
        return "none", "", ""
    speedup = "" if f.speedup is None else f"x{f.speedup:.2f}"
    return f"`{f.rule}`", f.severity, speedup


def _loud(run: Run) -> str:
    if run.error is not None:
        return f"{FAILED}: {run.error}"
    return ", ".join(f"`{f.rule}` {f.severity}" for f in run.loud) or "none"


def render_fault(fault: Fault) -> list[str]:
    """The page's section on one fault script."""
    lines = [f"### `{fault.script}` → `{fault.rule}`", "", fault.plants, ""]
    if fault.known_miss:
        lines += [f"Known miss: {fault.known_miss}.", ""]
    lines += [
        "| run | top finding about the job | severity | speed-up | verdict |",
        "| --- | --- | --- | --- | --- |",
    ]
    for run in fault.runs:
        rule, severity, speedup = _finding(top(run))
        if run.error is not None:
            verdict = f"{FAILED}: {run.error}"
        elif run.variant == FIXED:
            verdict = "clean" if clean(run) else f"loud: {_loud(run)}"
        else:
            verdict = "planted rule on top" if caught(run, fault.rule) else "missed"
        lines.append(f"| {run.variant} | {rule} | {severity} | {speedup} | {verdict} |")
    return [*lines, ""]


def _share(hits: int, runs: int) -> str:
    return f"{hits}/{runs}" + (f" ({hits / runs:.0%})" if runs else "")


def render(machine: Machine, faults: Sequence[Fault], controls: Sequence[Run]) -> str:
    """The whole page (Markdown) from the runs' outcomes."""
    lines = [
        "# Accuracy on the scenario zoo",
        "",
        f"Generated by `{machine.command}` on {machine.date}: {machine.cores} core(s), "
        f"{machine.cpu}, torch {machine.torch}. Do not edit by hand.",
        "",
        "## Summary",
        "",
        "| what | result |",
        "| --- | --- |",
    ]
    scored = [f for f in faults if not f.known_miss]
    for magnitude in MAGNITUDES:
        pairs = [(f, r) for f in scored for r in f.runs if r.variant == magnitude]
        hits = sum(caught(r, f.rule) for f, r in pairs)
        lines.append(f"| planted rule on top, {magnitude} | {_share(hits, len(pairs))} |")
    twins = [r for f in scored for r in f.runs if r.variant == FIXED]
    lines.append(f"| fixed twins clean | {_share(sum(clean(r) for r in twins), len(twins))} |")
    alarms = sum(not clean(r) for r in controls)
    lines.append(f"| false alarms on healthy controls | {_share(alarms, len(controls))} |")
    lines += ["", "## Faults", ""]
    for fault in faults:
        lines += render_fault(fault)
    lines += [
        "## Healthy controls",
        "",
        "A false alarm is a warning or critical finding about the job.",
        "",
        "| script | runs | false alarms | loud findings |",
        "| --- | --- | --- | --- |",
    ]
    for script in dict.fromkeys(r.script for r in controls):
        runs = [r for r in controls if r.script == script]
        loud = sorted({_loud(r) for r in runs if not clean(r)})
        bad = sum(not clean(r) for r in runs)
        lines.append(f"| `{script}` | {len(runs)} | {bad} | {'; '.join(loud) or 'none'} |")
    rate = f"{alarms / len(controls):.1%}" if controls else "n/a (no control ran)"
    lines += ["", f"False-alarm rate: {alarms} of {len(controls)} runs, {rate}.", ""]
    return "\n".join(lines)


def plants(script: str) -> str:
    """The first paragraph of a scenario script's docstring, on one line."""
    doc = ast.get_docstring(ast.parse((ZOO / script).read_text())) or ""
    return " ".join(doc.split("\n\n")[0].split())


def run_job(script: str, variant: str, rule: str | None, folder: Path) -> Run:
    """Run ``script`` as ``variant`` under ``stepdoctor run`` in ``folder``; its outcome."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "ZOO_FIXED": "0"}
    if variant == FIXED:
        env["ZOO_FIXED"] = "1"
    elif variant in MAGNITUDES:
        env["ZOO_MAGNITUDE"] = variant
    out = folder / "report.json"
    command = [sys.executable, "-m", "stepdoctor", "run", "--no-report", "--json", str(out)]
    proc = subprocess.run(
        [*command, "--out", str(folder / "run"), str(ZOO / script)],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    if proc.returncode != 0 or not out.exists():
        last = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
        return Run(script=script, variant=variant, error=last[:200])
    report = json.loads(out.read_text())
    findings = [
        Finding(rule=f["rule"], severity=f["severity"], speedup=f.get("estimated_speedup"))
        for f in report["findings"]
    ]
    return Run(script=script, variant=variant, findings=about_the_job(findings, rule))


def machine(command: str) -> Machine:
    """This machine and the command that made the page."""
    info = Path("/proc/cpuinfo")
    lines = info.read_text().splitlines() if info.exists() else []
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    try:
        torch = version("torch")
    except PackageNotFoundError:
        torch = "not installed"
    return Machine(
        command=command,
        cores=len(os.sched_getaffinity(0)),
        cpu=names[0] if names else (platform.processor() or platform.machine()),
        torch=torch,
        date=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    )


def _selected(only: set[str], script: str) -> bool:
    return not only or script.removesuffix(".py") in only


def main() -> None:
    """Run the zoo's faults, twins and controls one at a time and write the page."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10, help="runs of each healthy control")
    parser.add_argument("--out", type=Path, default=Path("docs/accuracy.md"))
    parser.add_argument("--only", default="", help="comma-separated script names")
    args = parser.parse_args()
    only = {s.strip().removesuffix(".py") for s in args.only.split(",") if s.strip()}
    catalogue = {**{s: (r, None) for s, r in FAULTS.items()}, **KNOWN_MISSES}
    with tempfile.TemporaryDirectory(prefix="stepdoctor-accuracy-") as tmp:
        count = iter(range(1_000_000))

        def job(script: str, variant: str, rule: str | None) -> Run:
            folder = Path(tmp) / f"{next(count):04d}"
            folder.mkdir()
            run = run_job(script, variant, rule, folder)
            first = top(run)
            said = run.error or (f"{first.rule} {first.severity}" if first else "no finding")
            print(f"{script:30} {variant:8} {said}", flush=True)
            return run

        faults = [
            Fault(
                script=script,
                rule=rule,
                plants=plants(script),
                runs=tuple(job(script, v, rule) for v in (*MAGNITUDES, FIXED)),
                known_miss=miss,
            )
            for script, (rule, miss) in catalogue.items()
            if _selected(only, script)
        ]
        controls = [
            job(script, "control", None)
            for script in (*HEALTHY, *CONTROLS)
            if _selected(only, script)
            for _ in range(args.repeats)
        ]
    command = shlex.join(["python", "benchmarks/accuracy.py", *sys.argv[1:]])
    page = render(machine(command), faults, controls)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(page)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
