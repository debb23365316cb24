"""What the gradient all-reduces cost the job where the backward does not hide them."""

from __future__ import annotations

from stepdoctor.jobs.rows import RankRow
from stepdoctor.jobs.stragglers import CONTENDED_SHARE, CRITICAL_WAIT_SHARE, MIN_CRITICAL_STEPS
from stepdoctor.model import DdpStats, Evidence, Finding, Fix, Severity, Speedup
from stepdoctor.rules.comm_bound import COMM_SHARE, POOR_OVERLAP

__all__ = ["comm_findings"]


def comm_findings(rows: list[RankRow]) -> list[Finding]:
    """The gradient all-reduces' own cost, when the part of it the backward does not hide is
    ``COMM_SHARE`` of the step or more. Measured on the rank that waits least in them (it
    arrives last, so its all-reduce time is the communication itself, not a wait for
    others); critical from ``CRITICAL_WAIT_SHARE`` with ``MIN_CRITICAL_STEPS`` steps; info
    below that for gloo while other processes took ``CONTENDED_SHARE`` of the hosts' CPUs."""
    timed = [r for r in rows if r.comm_ms is not None and r.mean_step_ms and r.ddp is not None]
    if len(timed) < 2:
        return []
    base = min(timed, key=lambda r: (r.comm_ms or 0.0, r.rank))
    ddp = base.ddp or DdpStats(model="", iterations=0)
    comm, step = base.comm_ms or 0.0, base.mean_step_ms or 1.0
    overlap = min(comm, (ddp.overlap_ns or 0) / 1e6)
    exposed = (comm - overlap) / step
    if exposed < COMM_SHARE:
        return []
    hidden = overlap / comm if comm else 0.0
    critical = exposed >= CRITICAL_WAIT_SHARE and min(r.steps for r in timed) >= MIN_CRITICAL_STEPS
    # gloo all-reduces on the CPUs: with other processes taking them, the least-waiting rank's
    # all-reduce holds its waits for the ranks they slowed, which DDP's averages cannot part
    # (a healthy 2-rank job beside a fresh-clone check: 12% exposed, against 3-5% quiet)
    others = max((r.others_cpu_share or 0.0 for r in timed), default=0.0)
    contended = ddp.backend == "gloo" and others >= CONTENDED_SHARE and not critical
    fixes = _comm_fixes(ddp, base.micro_batches, hidden)
    settings = _ddp_settings(ddp)
    return [
        Finding(
            rule="comm-bound",
            ranks=tuple(r.rank for r in timed),
            severity=(
                Severity.INFO if contended else Severity.CRITICAL if critical else Severity.WARNING
            ),
            title=(
                f"Gradient all-reduces take {exposed:.0%} of each step that the backward "
                "does not hide"
            ),
            explanation=(
                f"Each step all-reduces the gradients across the {len(timed)} ranks: "
                f"{comm:.1f} ms a step on rank {base.rank}, the rank that waits least for the "
                f"others (its time is the communication itself), of its {step:.1f} ms step. "
                f"{overlap:.1f} ms of it ran while the backward still computed ({hidden:.0%}); "
                f"the rest, {comm - overlap:.1f} ms, every rank waits for. DDP's settings: "
                f"{settings}."
                + (
                    f" Other processes used {others:.0%} of the ranks' host CPUs during their "
                    "steps: a gloo all-reduce's time then holds waits for the ranks they "
                    "slowed; measure on a quiet host before acting on it."
                    if contended
                    else ""
                )
                + (
                    f" DDP times one backward: with {base.micro_batches:.0f} a step and no "
                    "no_sync, each all-reduces, so this is the least it costs."
                    if base.micro_batches is not None and base.micro_batches > 1
                    else ""
                )
            ),
            evidence=(
                Evidence(
                    metric="all-reduce time a step (the rank that waits least)",
                    value=round(comm, 2),
                    unit="ms",
                    source="DDP logging data",
                ),
                Evidence(
                    metric="of it, overlapped with the backward",
                    value=round(hidden, 3),
                    unit="share",
                    threshold=POOR_OVERLAP / 100,
                    source="DDP logging data",
                ),
                Evidence(
                    metric="exposed all-reduce time, share of the step",
                    value=round(exposed, 3),
                    unit="share",
                    threshold=COMM_SHARE,
                    source="DDP logging data, steps",
                ),
            ),
            speedup=Speedup(
                factor=1 / (1 - min(exposed, 0.95)),
                basis=(
                    f"1 / (1 - {exposed:.2f}): the exposed all-reduce time hidden behind the "
                    "backward or shared by more samples a step (a bound: the all-reduce "
                    "still takes the cores or the network it takes)"
                ),
            ),
            fix=Fix(summary=" ".join(fixes)),
        )
    ]


def _comm_fixes(ddp: DdpStats, micro_batches: float | None, hidden: float) -> list[str]:
    """What applies to this job, in DDP's own terms, most effective first."""
    fixes = []
    if micro_batches is not None and micro_batches > 1:
        fixes.append(
            f"It accumulates {micro_batches:.0f} micro-batches a step: run all but the last "
            "inside `with model.no_sync():`, one all-reduce a step instead of one a "
            "micro-batch."
        )
    fixes.append(
        "An all-reduce costs the same whatever the batch: more samples a rank a step (a larger "
        "batch, or gradient accumulation with no_sync) share it."
    )
    if hidden < POOR_OVERLAP / 100:
        cap = f"{ddp.bucket_cap_bytes / 2**20:.0f} MiB" if ddp.bucket_cap_bytes else "25 MiB"
        fixes.append(
            f"Little of it overlaps the backward: DDP all-reduces the gradients in buckets of "
            f"up to {cap}, each once all of its gradients are ready, so a bucket that holds "
            "gradients the backward makes late waits for its end; a smaller bucket_cap_mb "
            "starts more of them during the backward (more, smaller all-reduces: measure both)."
        )
    if not ddp.comm_hook:
        fixes.append(
            "Compress the gradients: model.register_comm_hook(None, "
            "torch.distributed.algorithms.ddp_comm_hooks.default_hooks.fp16_compress_hook) "
            "(bf16_compress_hook) halves the bytes; powerSGD_hook cuts more."
        )
    if ddp.find_unused_parameters:
        fixes.append(
            "find_unused_parameters=True walks the autograd graph every step and holds back "
            "buckets: set it False unless some parameters get no gradient."
        )
    if ddp.static_graph is False:
        fixes.append("static_graph=True, if the graph is the same every step.")
    return fixes


def _ddp_settings(ddp: DdpStats) -> str:
    """DDP's settings that bear on its communication, in its own argument names."""
    parts = [
        f"backend {ddp.backend or 'unknown'}",
        "bucket_cap_mb="
        + (f"{ddp.bucket_cap_bytes / 2**20:g}" if ddp.bucket_cap_bytes else "unknown"),
        f"comm hook {ddp.comm_hook or 'none'}",
    ]
    for name in ("find_unused_parameters", "static_graph", "gradient_as_bucket_view"):
        value = getattr(ddp, name)
        if value is not None:
            parts.append(f"{name}={value}")
    return ", ".join(parts)
