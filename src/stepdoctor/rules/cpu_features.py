"""cpu-features: the CPU lacks AVX2/AVX-512, or torch uses less of it than it has.

Detects, on x86 CPUs: a CPU without AVX2 (warning on a CPU job); torch's CPU kernels
(``torch.backends.cpu.get_cpu_capability()``) below what the CPU supports, e.g. forced down by
ATEN_CPU_CAPABILITY (warning); a CPU without AVX-512 (info). On a GPU job these matter less
and are info.
Evidence: the CPU's flags (py-cpuinfo), torch's capability, ATEN_CPU_CAPABILITY.
Fix: unset ATEN_CPU_CAPABILITY; for a CPU without AVX2, move training to a newer machine.
"""

from __future__ import annotations

from stepdoctor.model import Evidence, Finding, Fix, RunRecord, Severity, Speedup
from stepdoctor.rules._facts import fact_bool, gpu_job, tensorflow_loop
from stepdoctor.rules.context import RuleContext
from stepdoctor.rules.registry import rule

__all__ = ["CAPABILITY_ORDER", "cpu_features"]

#: torch's CPU kernel levels, lowest first (ATen's CPU dispatch: DEFAULT, AVX2, AVX512).
#: DL4J's guide ("Check your CPU supports AVX2/AVX-512") reports 2-3x from vectorised builds.
CAPABILITY_ORDER = ("DEFAULT", "NO AVX", "AVX", "AVX2", "AVX512")


_X86 = ("x86_64", "amd64", "i386", "i686")


def _level(name: str) -> int:
    name = name.upper()
    return CAPABILITY_ORDER.index(name) if name in CAPABILITY_ORDER else -1


@rule(
    id="cpu-features",
    title="CPU vector instructions unused or missing",
    requires=("env", "cpu_flags"),
    scope="env",
)
def cpu_features(ctx: RuleContext) -> list[Finding]:
    """Flag a missing AVX2, a torch capability below the CPU's, and (info) no AVX-512."""
    record = ctx.record
    arch = record.env_value("cpu.arch")
    if not isinstance(arch, str) or arch.lower() not in _X86:
        return []  # AVX is x86's; ARM (NEON/SVE) and others are not judged here
    avx2 = fact_bool(record, "cpu.avx2")
    avx512 = fact_bool(record, "cpu.avx512")
    capability = record.env_value("torch.cpu_capability")
    on_gpu = gpu_job(record)
    findings = []
    best = "AVX512" if avx512 else "AVX2" if avx2 else None
    if isinstance(capability, str) and best and 0 <= _level(capability) < _level(best):
        findings.append(_forced_down(record, capability, best, on_gpu))
    if avx2 is False:
        findings.append(_missing("AVX2", Severity.INFO if on_gpu else Severity.WARNING, record))
    elif avx2 and avx512 is False and not on_gpu:
        findings.append(_missing("AVX-512", Severity.INFO, record))
    return findings


def _evidence(record: RunRecord) -> list[Evidence]:
    forced = record.env_value("env.ATEN_CPU_CAPABILITY")
    return [
        Evidence(metric="CPU", value=record.env_value("cpu.brand") or "?", source="py-cpuinfo"),
        Evidence(metric="AVX2", value=record.env_value("cpu.avx2"), source="py-cpuinfo"),
        Evidence(metric="AVX-512", value=record.env_value("cpu.avx512"), source="py-cpuinfo"),
    ] + (
        []
        if _library(record) != "torch's"  # a job on another library: torch's levels are moot
        else [
            Evidence(
                metric="torch CPU capability",
                value=record.env_value("torch.cpu_capability"),
                source="torch.backends.cpu.get_cpu_capability()",
            ),
            Evidence(
                metric="ATEN_CPU_CAPABILITY",
                value="unset" if forced is None else forced,
                source="environment",
            ),
        ]
    )


def _forced_down(record: RunRecord, capability: str, best: str, on_gpu: bool) -> Finding:
    forced = record.env_value("env.ATEN_CPU_CAPABILITY")
    why = (
        f"ATEN_CPU_CAPABILITY={forced} forces it down"
        if forced
        else "this torch build does not ship kernels for it"
    )
    return Finding(
        rule="cpu-features",
        severity=Severity.INFO if on_gpu else Severity.WARNING,
        title=f"torch uses {capability} kernels on a CPU with {best}",
        explanation=(
            f"The CPU supports {best}, but torch dispatches its {capability} kernels: {why}. "
            "Vectorised kernels do several times the arithmetic per instruction."
        ),
        evidence=tuple(_evidence(record)),
        speedup=Speedup.none("not estimated: depends on the op mix"),
        fix=Fix(
            summary="Unset ATEN_CPU_CAPABILITY (or set it to "
            f"{best.lower()}), and use an official torch build.",
            snippet="unset ATEN_CPU_CAPABILITY",
        ),
    )


#: The library whose kernels a job's compute runs, by the backend Keras noted.
_KERAS_BACKENDS = {"tensorflow": "TensorFlow's", "jax": "JAX's (XLA's)"}


def _library(record: RunRecord) -> str:
    """Whose CPU kernels the job runs, in its own terms: Keras's backend where it is not
    torch, torch where its facts are there, else deep-learning libraries in general."""
    backend = record.env_value("keras.backend")
    if isinstance(backend, str) and backend in _KERAS_BACKENDS:
        return _KERAS_BACKENDS[backend]
    if tensorflow_loop(record):
        return "TensorFlow's"
    if record.env_value("torch.version") is not None:
        return "torch's"
    return "deep-learning libraries'"


def _missing(feature: str, severity: Severity, record: RunRecord) -> Finding:
    return Finding(
        rule="cpu-features",
        severity=severity,
        title=f"The CPU has no {feature}",
        explanation=(
            f"This CPU lacks {feature}; {_library(record)} fastest CPU kernels need it "
            "(DL4J's guide, "
            "'Check your CPU supports AVX2/AVX-512'). CPU-side work runs slower here than "
            "on a recent server CPU."
        ),
        evidence=tuple(_evidence(record)),
        speedup=Speedup.none("not estimated: needs other hardware"),
        fix=Fix(summary=f"Train on a machine whose CPU has {feature}, or on a GPU."),
    )
