"""``stepdoctor tune``: run the script several times, each with one change, and keep the best
change only when it is faster beyond noise.

Each run is a child ``stepdoctor run`` with the change in ``STEPDOCTOR_TUNE`` and a step
limit; its throughput is the report's samples/s (warm-up left out) and its memory the run
record's peak RSS. The baseline runs first: the job's own settings (workers, threads, batch
size) decide which changes are worth trying. Repeats are interleaved across configurations so
machine drift hits all alike.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from stepdoctor.errors import UsageError
from stepdoctor.experiments.overrides import TUNE_ENV, Overrides
from stepdoctor.model import TuneResult, TuneTrial
from stepdoctor.record import load_run

__all__ = ["BASELINE_RUN", "DIMENSIONS", "MIN_GAIN", "Launch", "plan", "sweep", "tune"]

#: The folder (under ``out_dir``) of the first baseline run's record.
BASELINE_RUN = "run1"

#: A change is recommended only when its median is at least 8% above the baseline's
#: (fournex's acceptance threshold) and its slowest repeat beats the baseline's fastest.
MIN_GAIN = 0.08
#: What can be swept: ``workers`` (num_workers 0..cores), ``loader`` (pin_memory,
#: persistent_workers, prefetch_factor), ``threads`` (torch.set_num_threads), ``batch``
#: (batch size /2, x2, x4 while memory allows).
DIMENSIONS = ("workers", "loader", "threads", "batch")


class Launch(Protocol):
    """How a run is started (``tune``'s ``launch``)."""

    def __call__(
        self, command: list[str], env: dict[str, str], timeout_s: float
    ) -> subprocess.CompletedProcess[str]:
        """Run ``command`` with the environment ``env`` (the whole of it): the finished
        process, as ``subprocess.run(..., capture_output=True, text=True)`` returns it.

        Raises:
            subprocess.TimeoutExpired: past ``timeout_s``.
        """
        ...


def _subprocess_launch(
    command: list[str], env: dict[str, str], timeout_s: float
) -> subprocess.CompletedProcess[str]:
    """``Launch`` as a fresh process."""
    return subprocess.run(
        command, check=False, capture_output=True, text=True, timeout=timeout_s, env=env
    )


@dataclass(frozen=True)
class _Config:
    change: str
    value: str
    overrides: Overrides


@dataclass(frozen=True)
class _Run:
    rate: float | None
    unit: str
    peak_rss: int | None
    error: str
    workers: int | None = None
    threads: int | None = None
    batch_size: int | None = None
    cores: int | None = None


def tune(
    script: Path,
    args: Sequence[str] = (),
    *,
    steps: int = 50,
    repeats: int = 2,
    only: Sequence[str] = DIMENSIONS,
    timeout_s: float = 300.0,
    progress: Callable[[str], None] | None = None,
    out_dir: Path | None = None,
    launch: Launch | None = None,
) -> TuneResult:
    """Sweep ``only`` dimensions of the job's settings; return every trial and the best one.

    Args:
        out_dir: keep every run's record there (``run1`` is the first baseline run); by
            default they go to a temporary folder that is removed.
        launch: starts each run (``python -m stepdoctor run ...`` with ``STEPDOCTOR_TUNE``
            in its environment); a fresh process by default.
    """
    unknown = set(only) - set(DIMENSIONS)
    if unknown:
        raise UsageError(f"unknown tuning dimensions {sorted(unknown)}; use {DIMENSIONS}")
    if steps < 5 or repeats < 1:
        raise UsageError("tune needs --steps >= 5 and --repeats >= 1")
    say = progress or (lambda _: None)
    with tempfile.TemporaryDirectory(prefix="stepdoctor-tune-") as tmp:
        where = out_dir or Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        runner = _Runner(where, script, list(args), timeout_s, launch or _subprocess_launch)
        base = _Config("baseline", "as written", Overrides(max_steps=steps))
        say("baseline run 1")
        first = runner.run(base)
        if first.rate is None:
            raise UsageError(f"the baseline run of {script} failed: {first.error}")
        configs = plan(first, steps=steps, only=only)
        runs: dict[_Config, list[_Run]] = {base: [first]}
        for repeat in range(repeats):
            order = configs if repeat == 0 else [base, *configs]
            for config in order if repeat % 2 == 0 else list(reversed(order)):
                if _given_up(config, runs):
                    continue
                say(f"{config.change}={config.value} (run {repeat + 1} of {repeats})")
                runs.setdefault(config, []).append(runner.run(config))
    trials = [_trial(c, runs.get(c, [])) for c in configs]
    baseline = _trial(base, runs[base])
    return _decide(
        script, steps, repeats=repeats, unit=first.unit, baseline=baseline, trials=trials
    )


def plan(base: _Run, *, steps: int, only: Sequence[str]) -> list[_Config]:
    """The one-change configurations worth trying, given the baseline's own settings."""
    cores = base.cores or os.cpu_count() or 1
    workers = base.workers or 0
    configs: list[_Config] = []

    def add(change: str, value: object, **kw: object) -> None:
        configs.append(_Config(change, str(value), Overrides(max_steps=steps, **kw)))  # type: ignore[arg-type]

    if "workers" in only and base.workers is not None:
        for n in range(cores + 1):
            if n != workers:
                add("num_workers", n, num_workers=n, persistent_workers=n > 0 or None)
                # Workers take cores from torch's intra-op threads: also try leaving the
                # workers their cores (on few cores, the plain change oversubscribes).
                threads = max(1, cores - n)
                if n > 0 and base.threads is not None and threads < base.threads:
                    add(
                        "num_workers",
                        f"{n} (+threads={threads})",
                        num_workers=n,
                        persistent_workers=True,
                        threads=threads,
                    )
    if "loader" in only and base.workers is not None:
        add("pin_memory", True, pin_memory=True)
        if workers > 0:
            add("prefetch_factor", 4, prefetch_factor=4)
            add("persistent_workers", True, persistent_workers=True)
    if "threads" in only:
        for n in sorted({1, max(1, cores // 2), cores}):
            if n != base.threads:
                add("threads", n, threads=n)
    if "batch" in only and base.batch_size:
        for scale, label in ((0.5, "/2"), (2.0, "x2"), (4.0, "x4")):
            if base.batch_size * scale >= 1:
                add("batch_size", f"{label} ({round(base.batch_size * scale)})", batch_scale=scale)
    return configs


def _given_up(config: _Config, runs: dict[_Config, list[_Run]]) -> bool:
    """Do not repeat a configuration that failed, nor a larger batch after a smaller one
    failed (out of memory)."""
    if any(r.error for r in runs.get(config, [])):
        return True
    scale = config.overrides.batch_scale
    if scale is None:
        return False
    return any(
        c.overrides.batch_scale is not None
        and c.overrides.batch_scale < scale
        and any(r.error for r in rs)
        for c, rs in runs.items()
    )


def _trial(config: _Config, runs: list[_Run]) -> TuneTrial:
    rates = tuple(r.rate for r in runs if r.rate is not None)
    rss = [r.peak_rss for r in runs if r.peak_rss is not None]
    errors = [r.error for r in runs if r.error]
    return TuneTrial(
        change=config.change,
        value=config.value,
        samples_per_sec=rates,
        peak_rss_bytes=max(rss) if rss else None,
        failed=errors[0] if errors else "",
    )


def _decide(
    script: Path,
    steps: int,
    *,
    repeats: int,
    unit: str,
    baseline: TuneTrial,
    trials: list[TuneTrial],
) -> TuneResult:
    base = baseline.median or 0.0
    done = [t for t in trials if t.median is not None and not t.failed]
    best = max(done, key=lambda t: t.median or 0.0, default=None)
    result = TuneResult(
        script=str(script),
        steps=steps,
        repeats=repeats,
        unit=unit,
        baseline=baseline,
        trials=tuple(trials),
        best=None,
        speedup=None,
        reason="",
    )
    if best is None or not base:
        return replace(result, reason="no configuration ran to the end")
    speedup = (best.median or 0.0) / base
    if speedup < 1 + MIN_GAIN:
        return replace(
            result,
            speedup=speedup,
            reason=f"the fastest change ({best.change}={best.value}) is {speedup:.2f}x the "
            f"baseline, below the {1 + MIN_GAIN:.2f}x needed: keep the job's settings",
        )
    if repeats > 1 and min(best.samples_per_sec) <= max(baseline.samples_per_sec):
        return replace(
            result,
            speedup=speedup,
            reason=f"{best.change}={best.value} is {speedup:.2f}x by median, but its runs "
            "overlap the baseline's: not beyond noise",
        )
    return replace(
        result,
        best=best,
        speedup=speedup,
        reason=f"{best.change}={best.value}: {speedup:.2f}x the baseline's median "
        + (
            "and every repeat faster than every baseline repeat"
            if repeats > 1
            else "(one repeat: rerun with --repeats 2 or more to rule out noise)"
        ),
    )


class _Runner:
    def __init__(
        self, tmp: Path, script: Path, args: list[str], timeout_s: float, launch: Launch
    ) -> None:
        self._tmp = tmp
        self._launch = launch
        self._script = script
        self._args = args
        self._timeout = timeout_s
        self._count = 0

    def run(self, config: _Config) -> _Run:
        self._count += 1
        out = self._tmp / f"run{self._count}"
        report = self._tmp / f"run{self._count}.json"
        command = [
            sys.executable, "-m", "stepdoctor", "run", "--no-report",
            "--json", str(report), "--out", str(out), str(self._script), *self._args,
        ]  # fmt: skip
        env = {**os.environ, TUNE_ENV: config.overrides.to_env()}
        try:
            proc = self._launch(command, env, self._timeout)
        except subprocess.TimeoutExpired:
            return _Run(None, "", None, f"timed out after {self._timeout:g} s")
        try:
            data = json.loads(report.read_text())
        except (OSError, ValueError):
            tail = (proc.stderr or "").strip().splitlines()[-1:] or ["no report"]
            return _Run(None, "", None, f"exit code {proc.returncode}: {tail[0]}")
        summary = data.get("summary", {})
        rate, unit = summary.get("samples_per_sec"), "samples/s"
        if rate is None:
            rate, unit = summary.get("batches_per_sec"), "batches/s"
        error = ""
        if data.get("end_status") not in ("stopped", "ok", "exit"):
            error = f"{data.get('end_status')}: exit code {data.get('exit_code')}"
            rate = None
        return self._details(out, rate, unit, error)

    def _details(self, out: Path, rate: float | None, unit: str, error: str) -> _Run:
        try:
            record = load_run(out)
        except Exception as exc:  # a record we cannot read still gives the throughput
            return _Run(rate, unit, None, error or f"record unreadable: {exc}")
        rss = [s.job_rss_bytes for s in record.system if s.job_rss_bytes is not None]
        threads = record.env_value("torch.num_threads")
        cores = record.env_value("cpu.affinity")
        loader = record.loaders[0] if record.loaders else None
        return _Run(
            rate=rate,
            unit=unit,
            peak_rss=max(rss) if rss else None,
            error=error,
            workers=None if loader is None else loader.num_workers,
            threads=threads if isinstance(threads, int) else None,
            batch_size=None if loader is None else loader.batch_size,
            cores=cores if isinstance(cores, int) else None,
        )


#: The Python API's name for the sweep (``stepdoctor.experiments.sweep``).
sweep = tune
