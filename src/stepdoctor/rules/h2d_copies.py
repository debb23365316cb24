"""h2d-copies: copies from host memory to the GPU hold up each step (live, no trace).

Detects, on a job whose models run on a GPU: the ``h2d`` phase (``.to(device)`` / ``.cuda()``
of CPU tensors, timed on the host) taking 15% of the step or more. A copy from pageable memory
is staged through a pinned buffer and blocks the host until it is done; one from pinned memory
with ``non_blocking=True`` returns at once and overlaps the GPU's work.
Evidence: the phase's share of the step, the copies from pageable and from pinned memory, how
busy NVML saw the GPU, the DataLoaders' ``pin_memory``.
Fix: keep data that fits on the GPU there (move it once); else ``pin_memory=True`` and
``.to(device, non_blocking=True)``.
"""

from __future__ import annotations

from stepdoctor.model import Evidence, Finding, Fix, Phase, Severity, Speedup
from stepdoctor.rules._facts import fact_int, gpu_job
from stepdoctor.rules._gpu import gpu_busy
from stepdoctor.rules._severity import grade
from stepdoctor.rules.context import RuleContext, speedup_if_removed
from stepdoctor.rules.h2d_bound import CRITICAL_SHARE, WARNING_SHARE
from stepdoctor.rules.registry import rule

__all__ = ["GPU_BOUND_GAIN", "h2d_copies"]

#: Under this modelled gain (the GPU's own work bounds it) the copies are noted, not flagged:
#: tensor-core-precision's warning gain.
GPU_BOUND_GAIN = 1.25


@rule(id="h2d-copies", title="Copies to the GPU hold up each step", where=("h2d",))
def h2d_copies(ctx: RuleContext) -> list[Finding]:
    """Flag a GPU job whose host-to-device copies take 15% of the step or more."""
    if not gpu_job(ctx.record):
        return []
    share = ctx.share(Phase.H2D)
    rung = grade(share, warning=WARNING_SHARE, critical=CRITICAL_SHARE)
    if rung is None:
        return []
    pageable = fact_int(ctx.record, "torch.h2d_pageable")
    pinned = fact_int(ctx.record, "torch.h2d_pinned")
    unpinned_loaders = [lo for lo in ctx.record.loaders if not lo.pin_memory]
    busy = gpu_busy(ctx)
    factor = speedup_if_removed(share)
    basis = f"the copies ({share:.0%} of the step) off the host's path, overlapped with the GPU"
    if busy is not None and busy[0] > 0:
        factor = min(factor, 1.0 / busy[0])
        basis += f", up to the GPU's own work ({busy[0]:.0%} busy: at most {1 / busy[0]:.1f}x)"
    evidence = [
        Evidence(
            metric="host-to-device copies' share of the step",
            value=round(share, 4),
            unit="share",
            threshold=rung.threshold,
            source="step phases (h2d)",
        )
    ]
    if pageable is not None or pinned is not None:
        evidence.append(
            Evidence(
                metric="copies from pageable / pinned memory",
                value=f"{pageable or 0} / {pinned or 0}",
                source="the .to()/.cuda() patch",
            )
        )
    if busy is not None:
        evidence.append(
            Evidence(
                metric="GPU busy during the steps",
                value=round(busy[0], 3),
                unit="share",
                source=f"NVML utilisation, {busy[1]} readings",
            )
        )
    if unpinned_loaders:
        evidence.append(
            Evidence(metric="DataLoaders without pin_memory", value=len(unpinned_loaders))
        )
    from_pageable = bool(pageable) and not pinned
    # A blocking copy also waits for the GPU's earlier work on its stream: with the GPU busy,
    # the h2d phase holds the GPU's time, not the copies', and the fix gains little.
    gpu_bound = busy is not None and factor < GPU_BOUND_GAIN
    return [
        Finding(
            rule="h2d-copies",
            severity=Severity.INFO if gpu_bound else rung.severity,
            title=f"Copies to the GPU take {share:.0%} of each step",
            explanation=(
                f"The host spends {share:.0%} of each step copying tensors to the GPU"
                + (
                    ", all from pageable memory: each copy is staged through a pinned buffer "
                    "and the host waits for it"
                    if from_pageable
                    else ", waiting for each copy to finish"
                )
                + "; meanwhile it launches no work for the GPU."
                + (
                    " The GPU was busy most of that time: the copies wait behind its work, and "
                    "taking them off the host's path gains little."
                    if gpu_bound
                    else ""
                )
            ),
            evidence=tuple(evidence),
            speedup=Speedup(factor=factor, basis=basis),
            fix=Fix(
                summary=(
                    "If the data fits in the GPU's memory, move it there once before training "
                    "and index batches on the GPU. Otherwise pin it (DataLoader(..., "
                    "pin_memory=True), or tensor.pin_memory()) and copy with "
                    ".to(device, non_blocking=True) so the copy overlaps the GPU's work."
                ),
                snippet=(
                    "loader = DataLoader(dataset, batch_size=256, num_workers=4, "
                    "pin_memory=True)\nx = x.to('cuda', non_blocking=True)"
                ),
            ),
        )
    ]
