"""``stepdoctor doctor`` and ``stepdoctor.lint``: the environment and model checks without a
training run.

The doctor probes the machine (facts), takes two CPU samples around the probes (who else uses
the CPUs) and one GPU sample, then runs the environment rules on that record. ``lint``
describes one model (FLOPs with an example input) and runs the model rules.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from stepdoctor.collect.sampling.nvml import NvmlReader
from stepdoctor.collect.sampling.readers import PsutilReader, Reader
from stepdoctor.model import (
    SCHEMA_VERSION,
    Check,
    Checkup,
    EnvFact,
    Finding,
    GpuSample,
    RunRecord,
    SystemSample,
)
from stepdoctor.probes.environment import (
    FAST_PROBES,
    PROBE_TIMEOUT_S,
    SLOW_PROBES,
    ProbeInputs,
    cpuinfo_kept,
    import_torch,
    keep_torch_facts,
    kept_torch_facts,
    probe_environment,
)
from stepdoctor.probes.model_lint import describe_model
from stepdoctor.probes.run_meta import new_run_meta

__all__ = ["EXIT_CODES", "SAMPLE_WINDOW_S", "checkup", "lint"]

#: ``stepdoctor doctor``'s exit code by the worst finding (None: nothing found).
EXIT_CODES = {None: 0, "info": 0, "warning": 1, "critical": 2}
#: How long the doctor watches the other processes' CPU use: long enough for psutil's
#: per-process counters (10 ms ticks) to mean something, short enough for a < 3 s doctor.
SAMPLE_WINDOW_S = 0.5


def checkup(
    *,
    environ: Mapping[str, str] = os.environ,
    inputs: ProbeInputs | None = None,
    readers: list[Reader] | None = None,
    describe_torch: bool = True,
    sample_window_s: float = SAMPLE_WINDOW_S,
    while_measuring: Callable[[], object] | None = None,
) -> Checkup:
    """Probe this machine and run the environment rules.

    Args:
        environ / inputs: the probes' seams (tests pass recorded readings).
        readers: what samples CPU and GPU use (default: psutil, and NVML when present).
        describe_torch: describe torch: imported here if the process has not yet, unless an
            earlier doctor of this boot kept what a fresh import decides and nothing that
            decides it has changed (``kept_torch_facts``).
        sample_window_s: how long other processes' CPU use is measured.
        while_measuring: work the caller needs next (loading its renderers), done while the
            window is open instead of after it.
    """
    started = time.monotonic()
    origin = time.perf_counter_ns()
    inputs = inputs or ProbeInputs(environ=environ, import_torch=False)
    if readers is None:
        readers = [PsutilReader(scan_every_ns=0, walk_every_ns=0)]
        nvml = _open_nvml(inputs.nvml, inputs.dev)
        if nvml is not None:
            readers.append(nvml)
    fresh = describe_torch and "torch" not in sys.modules
    kept = kept_torch_facts(inputs) if fresh else None
    # Who else uses the CPUs: a first read primes the counters, a second one closes the window.
    # The window runs while the probes do, unless py-cpuinfo must run its child process (its
    # answer is not kept from earlier this boot), whose CPU would count as another process's,
    # or torch must be imported (seconds of both cores that push the others aside): then it
    # opens after them.
    during = cpuinfo_kept(inputs) and not (fresh and kept is None)
    opened = time.monotonic()
    first = _sample(readers, time.perf_counter_ns()) if during else []
    slow: list[EnvFact] = []
    background = threading.Thread(
        target=lambda: slow.extend(probe_environment(probes=SLOW_PROBES, inputs=inputs)),
        name="stepdoctor-probe",
        daemon=True,
    )
    background.start()
    if fresh and kept is None:
        import_torch()  # in this thread: an import is not something to abandon half-way
    facts = probe_environment(
        probes=FAST_PROBES, inputs=inputs if kept is None else replace(inputs, kept=tuple(kept))
    )
    if fresh and kept is None and "torch" in sys.modules:
        keep_torch_facts(inputs, facts)
    background.join()
    facts += slow
    if not during:
        opened = time.monotonic()
        first = _sample(readers, time.perf_counter_ns())
    from stepdoctor.rules import RULES, RuleContext, run_rules  # while the window is open

    if while_measuring is not None:
        while_measuring()
    time.sleep(max(0.0, sample_window_s - (time.monotonic() - opened)))
    samples = _sample(readers, time.perf_counter_ns()) or first
    record = RunRecord(
        meta=new_run_meta(("stepdoctor", "doctor"), origin),
        env=tuple(facts),
        system=tuple(s for s in samples if isinstance(s, SystemSample)),
        gpu=tuple(s for s in samples if isinstance(s, GpuSample)),
    )
    for reader in readers:
        close = getattr(reader, "close", None)
        if callable(close):
            close()
    findings, skipped = run_rules(RuleContext(record, checkup=True), scopes=("env",))
    why = {s.rule: s.reason for s in skipped}
    checks = []
    for rule in RULES.values():
        if rule.scope != "env":
            continue
        mine = [f for f in findings if f.rule == rule.id]
        if rule.id in why:
            checks.append(
                Check(rule=rule.id, title=rule.title, status="skipped", reason=why[rule.id])
            )
            continue
        status = min((f.severity for f in mine), key=lambda s: s.rank, default=None)
        checks.append(
            Check(rule=rule.id, title=rule.title, status=status.value if status else "ok")
        )
    return Checkup(
        schema_version=SCHEMA_VERSION,
        meta=record.meta,
        facts=tuple(facts),
        checks=tuple(checks),
        findings=tuple(findings),
        duration_s=time.monotonic() - started,
    )


def lint(model: Any, example_input: Any = None) -> list[Finding]:
    """Run the model checks on a torch module; return the findings, most important first.

    Args:
        model: a ``torch.nn.Module``.
        example_input: one batch as the model takes it (a tensor, a tuple of arguments or a
            dict of keyword arguments); gives the input size and the FLOPs per sample. The
            model runs it once under ``torch.no_grad()`` in eval mode; its mode is restored.
    """
    from stepdoctor.rules import RuleContext, run_rules

    info = describe_model(model, example_input=example_input)
    facts = probe_environment(probes=FAST_PROBES, inputs=ProbeInputs(environ=os.environ))
    record = RunRecord(
        meta=new_run_meta(("stepdoctor.lint",), time.perf_counter_ns()),
        models=(info,),
        env=tuple(facts),
    )
    findings, _ = run_rules(RuleContext(record), scopes=("model",))
    return findings


def _open_nvml(module: Any, dev: Path) -> NvmlReader | None:
    """NvmlReader.open, abandoned after the probe timeout (a wedged driver can hang it)."""
    opened: list[NvmlReader | None] = []
    thread = threading.Thread(
        target=lambda: opened.append(NvmlReader.open(module, dev=dev)),
        name="stepdoctor-nvml",
        daemon=True,
    )
    thread.start()
    thread.join(PROBE_TIMEOUT_S)
    return opened[0] if opened else None


def _sample(readers: list[Reader], t_ns: int) -> list[SystemSample | GpuSample]:
    samples: list[SystemSample | GpuSample] = []
    for reader in readers:
        try:
            samples.extend(reader.read(t_ns))
        except Exception:  # a reader that fails leaves its readings out, nothing else
            continue
    return samples
