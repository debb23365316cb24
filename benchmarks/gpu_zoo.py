"""The GPU zoo on a machine with a CUDA GPU: each fault's true gain, measured, and what
stepdoctor says of the job and of its fixed twin (``tests/scenarios_gpu/``).

Two parts, each written to ``--out`` as it goes (a run cut short keeps what it did):

- ``--gains``: in this one process, each fault script's ``run(False)`` and ``run(True)``,
  interleaved, ``--rounds`` times; the true gain is the median of the rounds' fixed/faulty
  samples/s ratios (``gains.json``).
- ``--runs``: each fault script and its fixed twin (``ZOO_FIXED=1``), and each healthy
  control, under ``stepdoctor run`` (a subprocess each, one at a time): the run folder, the
  JSON report, the script's own samples/s and the findings (``runs.json``).

It prints a Markdown table of both. ``--build`` first compiles the C parts in place with
setuptools (on a machine where ``pip install -e .`` cannot run: no network for hatchling).

    python benchmarks/gpu_zoo.py --out /tmp/gpu-zoo --build --gains --runs
    python benchmarks/gpu_zoo.py --out /tmp/gpu-zoo --runs --only g01,h01
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ZOO = ROOT / "tests" / "scenarios_gpu"
sys.path.insert(0, str(ZOO))

from _catalog import FAULTS, HEALTHY, RUN_SCALE  # noqa: E402


def c_parts() -> list[tuple[str, str]]:
    """(module, source) of each C part: hatch_build.py's ``EXTENSIONS``, read from its text
    (importing it needs hatchling, which a machine without network may lack)."""
    tree = ast.parse((ROOT / "hatch_build.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "EXTENSIONS" for t in node.targets
        ):
            return list(ast.literal_eval(node.value))
    raise LookupError("hatch_build.py has no EXTENSIONS")


def build_c_parts() -> list[str]:
    """Compile each C part next to its source; the modules that built."""
    from setuptools import Distribution, Extension
    from setuptools.command.build_ext import build_ext

    built = []
    os.chdir(ROOT)
    for module, source in c_parts():
        dist = Distribution(
            {"ext_modules": [Extension(module, [source])], "package_dir": {"": "src"}}
        )
        cmd = build_ext(dist)
        cmd.inplace = True
        cmd.ensure_finalized()
        try:
            cmd.run()
            built.append(module)
        except Exception as exc:  # a part that does not build runs as its Python twin
            print(f"not built: {module}: {exc}", file=sys.stderr)
    return built


def _write(path: Path, data: object) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)


def gains(scripts: list[str], rounds: int, out: Path) -> dict[str, Any]:
    """Each fault's fixed/faulty samples/s, interleaved in a process of its own (this one
    never holds the GPU: a process with a CUDA context left over would be on the GPU beside
    every job that ``--runs`` watches)."""
    result: dict[str, Any] = {}
    for script in scripts:
        proc = subprocess.run(
            [
                sys.executable,
                __file__,
                "--out",
                str(out),
                "--gain-of",
                script,
                "--rounds",
                str(rounds),
            ],
            check=False,
            capture_output=True,
            text=True,
            timeout=600,
        )
        lines = proc.stdout.strip().splitlines()
        if proc.returncode != 0 or not lines:
            result[script] = {"error": (proc.stderr or proc.stdout).strip()[-2000:]}
            _write(out / "gains.json", result)
            continue
        faulty, fixed = json.loads(lines[-1])
        ratios = [b / a for a, b in zip(faulty, fixed, strict=True)]
        result[script] = {
            "faulty_samples_per_s": faulty,
            "fixed_samples_per_s": fixed,
            "gain": statistics.median(ratios),
            "gain_spread": [min(ratios), max(ratios)],
        }
        print(f"gain {script}: {result[script]['gain']:.2f}x {ratios}", flush=True)
        _write(out / "gains.json", result)
    return result


def gain_of(script: str, rounds: int) -> None:
    """In this process: ``run(False)`` and ``run(True)`` of one script, interleaved,
    ``rounds`` times; prints ``[faulty samples/s...], [fixed samples/s...]`` as JSON."""
    module = importlib.import_module(script.removesuffix(".py"))
    faulty, fixed = [], []
    for _ in range(rounds):
        faulty.append(module.run(False))
        fixed.append(module.run(True))
    print(json.dumps([faulty, fixed]))


def runs(scripts: list[str], out: Path) -> dict[str, Any]:
    """Each script (faults: and its fixed twin) under ``stepdoctor run``."""
    result: dict[str, Any] = {}
    for script in scripts:
        for fixed, scale in enumerate(RUN_SCALE[script]):
            name = f"{script.removesuffix('.py')}.{fixed}"
            report = out / f"{name}.json"
            started = time.perf_counter()
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "stepdoctor",
                    "run",
                    "--no-report",
                    "--json",
                    str(report),
                    "--out",
                    str(out / name),
                    str(ZOO / script),
                ],
                check=False,
                capture_output=True,
                text=True,
                timeout=300,
                env={**os.environ, "ZOO_FIXED": str(fixed), "ZOO_STEP_SCALE": str(scale)},
                cwd=ZOO,
            )
            entry: dict[str, Any] = {
                "returncode": proc.returncode,
                "wall_s": time.perf_counter() - started,
                "step_scale": scale,
                "printed": [line for line in proc.stdout.splitlines() if "samples_per_s" in line],
            }
            if proc.returncode != 0:
                entry["stderr"] = proc.stderr[-3000:]
            if report.exists():
                data = json.loads(report.read_text())
                entry["summary"] = data.get("summary")
                entry["findings"] = [
                    {
                        k: f.get(k)
                        for k in ("rule", "severity", "title", "estimated_speedup", "speedup_basis")
                    }
                    for f in data.get("findings", [])
                ]
            result[name] = entry
            _write(out / "runs.json", result)
            top = [
                f"{f['rule']}:{f['severity']}"
                for f in entry.get("findings", [])
                if f["severity"] != "info"
            ]
            print(f"run {name}: rc {proc.returncode} {entry['wall_s']:.1f}s {top}", flush=True)
    return result


def table(gain: dict[str, Any], ran: dict[str, Any]) -> str:
    lines = [
        "| job | planted | true gain | faulty: loud findings | fixed: loud findings |",
        "|---|---|---|---|---|",
    ]

    def loud(name: str) -> str:
        entry = ran.get(name)
        if entry is None:
            return "not run"
        if entry["returncode"] != 0:
            return f"exit {entry['returncode']}"
        found = [f for f in entry.get("findings", []) if f["severity"] in ("warning", "critical")]
        return (
            ", ".join(
                f"{f['rule']} {f['severity']} x{f['estimated_speedup'] or 0:.2f}" for f in found
            )
            or "none"
        )

    for script in [*FAULTS, *HEALTHY]:
        stem = script.removesuffix(".py")
        g = gain.get(script, {})
        figure = f"{g['gain']:.2f}x" if "gain" in g else g.get("error", "—")
        planted = FAULTS[script][0] if script in FAULTS else "healthy"
        fixed = loud(f"{stem}.1") if script in FAULTS else "—"
        lines.append(f"| {stem} | {planted} | {figure} | {loud(f'{stem}.0')} | {fixed} |")
    return "\n".join(lines)


DOC = """# Accuracy on a GPU: the GPU zoo

Generated by `python benchmarks/gpu_zoo.py {argv}`: each job of `tests/scenarios_gpu/` and its
fixed twin, watched by `stepdoctor run` on one NVIDIA H200 (16 cores, torch 2.11 + CUDA 13.0),
the true gain of each fix measured without stepdoctor (`--gains`: the fixed and faulty jobs
interleaved in one process, median of 2 rounds). "Loud" findings are warnings and criticals;
each claim is the finding's modelled speed-up. `make test-gpu` runs it all again on a machine
with a GPU.

{text}
"""


def rejudge(out: Path, ran: dict[str, Any]) -> dict[str, Any]:
    """The findings of today's rules on each run folder under ``out`` (the records a GPU
    machine wrote, judged again here without one)."""
    from stepdoctor.record.reader import load_run
    from stepdoctor.rules import RuleContext, run_rules

    judged = {}
    for name, entry in ran.items():
        folder = out / name
        if not (folder / "run.jsonl").exists():
            judged[name] = {**entry, "returncode": entry.get("returncode", 1) or 1}
            continue
        found = run_rules(RuleContext(load_run(folder)))[0]
        judged[name] = {
            **entry,
            "findings": [
                {
                    "rule": f.rule,
                    "severity": str(f.severity),
                    "title": f.title,
                    "estimated_speedup": f.speedup.factor,
                    "speedup_basis": f.speedup.basis,
                }
                for f in found
            ],
        }
    return judged


def scores(gain: dict[str, Any], ran: dict[str, Any]) -> list[str]:
    """Planted cause on top, fixed twins clean, claims within 1.3x of the true gain."""

    def loud(name: str) -> list[dict[str, Any]]:
        return [
            f
            for f in ran.get(name, {}).get("findings", [])
            if f["severity"] in ("warning", "critical")
        ]

    named = [s for s, (_, rule_id) in FAULTS.items() if rule_id]
    on_top = [s for s in named if (top := loud(f"{s[:-3]}.0")) and top[0]["rule"] == FAULTS[s][1]]
    clean = [s for s in FAULTS if f"{s[:-3]}.1" in ran and not loud(f"{s[:-3]}.1")]
    twins = [s for s in FAULTS if f"{s[:-3]}.1" in ran]
    controls = [h for h in HEALTHY if f"{h[:-3]}.0" in ran and "summary" in ran[f"{h[:-3]}.0"]]
    quiet = [h for h in controls if not loud(f"{h[:-3]}.0")]
    claims = []
    for s in on_top:
        true = gain.get(s, {}).get("gain")
        claim = loud(f"{s[:-3]}.0")[0]["estimated_speedup"]
        if true and claim:
            claims.append((s, claim, true, max(claim / true, true / claim) <= 1.3))
    return [
        f"- planted cause on top: {len(on_top)} of {len(named)} faults with a rule for it "
        f"({', '.join(s[:-3] for s in on_top) or 'none'})",
        f"- fixed twins with no warning or critical finding: {len(clean)} of {len(twins)}",
        f"- healthy controls with no warning or critical finding: {len(quiet)} of {len(controls)}",
        f"- claims within 1.3x of the true gain: {sum(c[3] for c in claims)} of {len(claims)} ("
        + "; ".join(f"{s[:-3]} x{c:.2f} vs {t:.2f}" for s, c, t, _ in claims)
        + ")",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--build", action="store_true")
    parser.add_argument("--gains", action="store_true")
    parser.add_argument("--runs", action="store_true")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", default="", help="comma-separated script name prefixes")
    parser.add_argument("--gain-of", default="", help=argparse.SUPPRESS)
    parser.add_argument("--doc", type=Path, help="write the table and scores to this page")
    parser.add_argument(
        "--rejudge",
        action="store_true",
        help="judge the run folders already under --out with today's rules (no GPU needed)",
    )
    args = parser.parse_args()
    if args.gain_of:
        gain_of(args.gain_of, args.rounds)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    if args.build:
        print("built:", build_c_parts(), flush=True)
    wanted = [
        s for s in [*FAULTS, *HEALTHY] if not args.only or s.startswith(tuple(args.only.split(",")))
    ]
    gain = gains([s for s in wanted if s in FAULTS], args.rounds, args.out) if args.gains else {}
    ran = runs(wanted, args.out) if args.runs else {}
    if args.rejudge:
        gain = gain or json.loads((args.out / "gains.json").read_text())
        ran = rejudge(args.out, ran or json.loads((args.out / "runs.json").read_text()))
    text = table(gain, ran) + "\n\n" + "\n".join(scores(gain, ran))
    print(text)
    if args.doc:
        args.doc.write_text(DOC.format(argv=" ".join(sys.argv[1:]), text=text))


if __name__ == "__main__":
    main()
