"""Do the speed-ups stepdoctor claims hold? Planted fault vs the same job fixed, measured.

For every fault script of the scenario zoo (``tests/scenarios/_catalog.py``), at one dose:

1. the true gain: the planted job and its fixed twin (``ZOO_FIXED=1``) in plain python, no
   stepdoctor, interleaved (the order alternating), ``--rounds`` times; each job writes its
   own throughput after its warm-up (``ZOO_TIMING``: steps, requests or samples a second, the
   unit a fix changes), and the true gain is the median of the rounds' fixed / planted ratios;
2. the claim: the planted job under ``stepdoctor run`` (and, with ``--verify``, under
   ``stepdoctor run --verify``), and the speed-up of the planted rule's finding there, measured
   where the report measured it, else modelled.

Writes a Markdown page: per fault the true gain and its spread, the claim, whether it was
measured or modelled, their quotient; then the share of claims within 1.3x of the truth, the
median |log(claim / truth)|, and the claims over 1.1x where the truth is under 1.05x.

    python benchmarks/calibration.py [--rounds 3] [--out docs/calibration.md]
    python benchmarks/calibration.py --only input_bound,float64 --rounds 1 --out /tmp/c.md
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))
sys.path.insert(0, str(Path(__file__).parent))

from tests.scenarios._catalog import FAULTS, KNOWN_MISSES, MAGNITUDES
from tests.scenarios._verdicts import MACHINE_RULES

from accuracy import Machine, machine, plants

ZOO = Path(__file__).resolve().parents[1] / "tests" / "scenarios"
#: A claim is right when within this factor of the true gain, either way (issue 23's bar).
WITHIN = 1.3
#: A claim of more than this where the truth is under ``NO_GAIN`` is a false promise.
OVERCLAIM = 1.1
NO_GAIN = 1.05
#: Longest a single job may run (seconds).
TIMEOUT_S = 300


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim:
    """What a report said about the planted fault's fix."""

    rule: str | None
    """The planted rule when it made a finding, else None."""
    severity: str = ""
    factor: float | None = None
    kind: str = ""
    """``measured`` or ``modelled``."""
    basis: str = ""
    top: str = ""
    """The report's first finding about the job (rule id)."""
    error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One fault: the true gain and what stepdoctor claimed."""

    script: str
    rule: str
    plants: str
    ratios: tuple[float, ...]
    """fixed / planted throughput, one per round."""
    error: str | None
    claims: tuple[tuple[str, Claim], ...]
    """``(how it ran, claim)``: ``run`` and, with ``--verify``, ``run --verify``."""
    known_miss: str | None = None

    @property
    def true(self) -> float | None:
        """The median of the rounds' ratios."""
        return statistics.median(self.ratios) if self.ratios else None


def quotient(claim: Claim, true: float | None) -> float | None:
    """claim / truth, when both are known."""
    if claim.factor is None or true is None or true <= 0:
        return None
    return claim.factor / true


def within(claim: Claim, true: float | None) -> bool:
    """Whether the claim is within ``WITHIN`` of the truth either way."""
    q = quotient(claim, true)
    return q is not None and 1 / WITHIN <= q <= WITHIN


def overclaims(claim: Claim, true: float | None) -> bool:
    """A speed-up over ``OVERCLAIM`` claimed where the fix gains under ``NO_GAIN``."""
    return (
        claim.factor is not None
        and true is not None
        and claim.factor > OVERCLAIM
        and true < NO_GAIN
    )


def plain(script: str, *, fixed: bool, magnitude: str, folder: Path) -> float | str:
    """Run the job in plain python; its throughput after warm-up, or why there is none."""
    timing = folder / f"timing-{'fixed' if fixed else 'planted'}.json"
    timing.unlink(missing_ok=True)
    env = {
        **os.environ,
        "PYTHONWARNINGS": "ignore",
        "ZOO_FIXED": "1" if fixed else "0",
        "ZOO_MAGNITUDE": magnitude,
        "ZOO_TIMING": str(timing),
    }
    proc = subprocess.run(
        [sys.executable, str(ZOO / script)],
        check=False,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env=env,
        cwd=ZOO,
    )
    try:
        data = json.loads(timing.read_text())
    except (OSError, ValueError):
        data = None
    if proc.returncode != 0 or not data:
        last = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
        return last[:200]
    return float(data["per_sec"])


def claim(script: str, rule: str, *, magnitude: str, folder: Path, verify: bool) -> Claim:
    """Run the planted job under ``stepdoctor run`` (``--verify``); what it says of ``rule``."""
    out = folder / ("verify.json" if verify else "run.json")
    command = [sys.executable, "-m", "stepdoctor", "run", "--no-report", "--json", str(out)]
    if verify:
        command.append("--verify")
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "ZOO_FIXED": "0", "ZOO_MAGNITUDE": magnitude}
    proc = subprocess.run(
        [*command, "--out", str(folder / out.stem), str(ZOO / script)],
        check=False,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env=env,
    )
    if not out.exists():
        last = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
        return Claim(rule=None, error=last[:200])
    findings = json.loads(out.read_text())["findings"]
    about = [f for f in findings if rule in MACHINE_RULES or f["rule"] not in MACHINE_RULES]
    top = about[0]["rule"] if about else ""
    mine = [f for f in findings if f["rule"] == rule]
    if not mine:
        return Claim(rule=None, top=top)
    f = mine[0]
    speedup = f["speedup"]
    return Claim(
        rule=rule,
        severity=f["severity"],
        factor=float(speedup["factor"]),
        kind=speedup.get("kind", ""),
        basis=speedup.get("basis", speedup.get("method", "")),
        top=top,
    )


def _x(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}x"


def render(machine: Machine, rows: Sequence[Row], hows: Sequence[str]) -> str:
    """The whole page (Markdown)."""
    lines = [
        "# Calibration: claimed speed-ups against measured ones",
        "",
        f"Generated by `{machine.command}` on {machine.date}: {machine.cores} core(s), "
        f"{machine.cpu}, torch {machine.torch}. Do not edit by hand.",
        "",
        "True gain: the fixed twin's throughput over the planted job's, both in plain python "
        "(no stepdoctor), interleaved, median of the rounds. Claim: the speed-up on the planted "
        "rule's finding (measured where the report measured it, else modelled). A claim is "
        f"within bounds when claim / true is between 1/{WITHIN} and {WITHIN}.",
        "",
        "## Summary",
        "",
        "| how | claims within 1.3x | median abs(log(claim/true)) | claims > 1.1x where "
        "true < 1.05x | planted rule not found |",
        "| --- | --- | --- | --- | --- |",
    ]
    scored = [r for r in rows if not r.known_miss]
    for how in hows:
        pairs = [(r, dict(r.claims)[how]) for r in scored if how in dict(r.claims)]
        good = sum(within(c, r.true) for r, c in pairs)
        logs = [abs(math.log(q)) for r, c in pairs if (q := quotient(c, r.true)) and q > 0]
        over = [r.script for r, c in pairs if overclaims(c, r.true)]
        missing = sum(c.rule is None for _, c in pairs)
        share = f"{good}/{len(pairs)} ({good / len(pairs):.0%})" if pairs else "0/0"
        med = f"{statistics.median(logs):.2f}" if logs else "n/a"
        lines.append(
            f"| `{how}` | {share} | {med} | {len(over)}"
            + (f" ({', '.join(over)})" if over else "")
            + f" | {missing} |"
        )
    lines += [
        "",
        "## Faults",
        "",
        "| fault | rule | true gain (rounds) | how | claim | kind | claim / true | top finding |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        spread = ", ".join(f"{x:.2f}" for x in r.ratios) or (r.error or "")
        rule = r.rule + (" (known miss)" if r.known_miss else "")
        for how, c in r.claims:
            said = c.error or ("not found" if c.rule is None else _x(c.factor))
            q = quotient(c, r.true)
            mark = "" if q is None else f"{q:.2f}" + ("" if within(c, r.true) else " ✗")
            lines.append(
                f"| `{r.script}` | `{rule}` | {_x(r.true)} ({spread}) | `{how}` | {said} "
                f"| {c.kind} | {mark} | `{c.top or 'none'}` |"
            )
    lines += ["", "## Bases of the claims", ""]
    for r in rows:
        for how, c in r.claims:
            if c.basis:
                lines.append(f"- `{r.script}` (`{how}`, {c.kind}): {c.basis}")
    lines += ["", "## What each fault plants", ""]
    lines += [f"- `{r.script}`: {r.plants}" for r in rows]
    return "\n".join(lines) + "\n"


def measure(
    script: str, rule: str, *, rounds: int, magnitude: str, folder: Path, verify: bool
) -> Row:
    """One fault's true gain and claims."""
    ratios: list[float] = []
    error = None
    for i in range(rounds):
        order = (False, True) if i % 2 == 0 else (True, False)
        rates = {f: plain(script, fixed=f, magnitude=magnitude, folder=folder) for f in order}
        planted, fixed = rates[False], rates[True]
        if isinstance(planted, str) or isinstance(fixed, str):
            error = planted if isinstance(planted, str) else str(fixed)
            continue
        ratios.append(fixed / planted)
    claims = [("run", claim(script, rule, magnitude=magnitude, folder=folder, verify=False))]
    if verify:
        claims.append(
            ("run --verify", claim(script, rule, magnitude=magnitude, folder=folder, verify=True))
        )
    miss = KNOWN_MISSES.get(script)
    return Row(
        script=script,
        rule=rule,
        plants=plants(script),
        ratios=tuple(ratios),
        error=error,
        claims=tuple(claims),
        known_miss=miss[1] if miss else None,
    )


def main() -> None:
    """Measure every selected fault and write the page."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved plain-python rounds")
    parser.add_argument("--magnitude", choices=MAGNITUDES, default="strong")
    parser.add_argument("--verify", action="store_true", help="also run the job with --verify")
    parser.add_argument("--out", type=Path, default=Path("docs/calibration.md"))
    parser.add_argument("--only", default="", help="comma-separated script names")
    args = parser.parse_args()
    only = {s.strip().removesuffix(".py") for s in args.only.split(",") if s.strip()}
    catalogue = {**FAULTS, **{s: r for s, (r, _) in KNOWN_MISSES.items()}}
    rows = []
    with tempfile.TemporaryDirectory(prefix="stepdoctor-calibration-") as tmp:
        for n, (script, rule) in enumerate(catalogue.items()):
            if only and script.removesuffix(".py") not in only:
                continue
            folder = Path(tmp) / f"{n:03d}"
            folder.mkdir()
            row = measure(
                script,
                rule,
                rounds=args.rounds,
                magnitude=args.magnitude,
                folder=folder,
                verify=args.verify,
            )
            said = "; ".join(
                f"{how}: {c.error or (_x(c.factor) + ' ' + c.kind if c.rule else 'not found')}"
                for how, c in row.claims
            )
            print(f"{script:30} true {_x(row.true) or row.error}  {said}", flush=True)
            rows.append(row)
    command = shlex.join(["python", "benchmarks/calibration.py", *sys.argv[1:]])
    hows = ("run", "run --verify") if args.verify else ("run",)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(machine(command), rows, hows))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
