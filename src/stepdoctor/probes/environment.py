"""Facts about the machine and the Python environment (observations only, no verdicts).

Each probe is a function returning ``EnvFact``s; ``probe_environment`` runs them, each on its own
daemon thread with a deadline, so a hanging library (an NVML call on a wedged driver, py-cpuinfo
in an odd container) costs at most the timeout and yields a ``probe.<name>`` fact saying why the
facts are unknown. Probes read through injectable seams (``environ``, the NVML module, the
``/dev`` and cgroup paths) so tests can feed recorded readings.

Fact keys (the rules read these):

- ``python.version``, ``platform``
- ``cpu.logical``, ``cpu.physical``, ``cpu.affinity``, ``cpu.arch``, ``cpu.brand``, ``cpu.avx2``,
  ``cpu.avx512`` (from py-cpuinfo; costly, so only where ``slow=True``, and its answer kept
  in the user's cache folder for the rest of the boot)
- ``env.<NAME>`` for ``ENV_VARS``
- ``pools.summary``, ``pools.max_threads`` (threadpoolctl: BLAS/OpenMP pools loaded now)
- ``mem.total_bytes``, ``mem.available_bytes``, ``mem.swap_total_bytes``,
  ``mem.swap_used_bytes``, ``mem.cgroup_limit_bytes``, ``shm.total_bytes``
- ``gpu.device_nodes``, ``gpu.count``, ``gpu.names``, ``gpu.capability``, ``gpu.total_bytes``
- ``torch.*``: version, build (CUDA, cuDNN, MKL, oneDNN, OpenMP), CPU capability, threads,
  devices available, cuDNN/TF32 switches, default dtype (only when torch is imported, or
  ``import_torch=True``)
- ``probe.<name>``: why a probe's facts are missing
"""

from __future__ import annotations

import logging
import os
import platform
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import psutil

from stepdoctor.model import EnvFact
from stepdoctor.probes.inputs import (
    ENV_VARS,
    THREAD_ENV_VARS,
    ProbeInputs,
    affinity,
    nvidia_present,
)
from stepdoctor.probes.kept import (
    CPUINFO_CACHE_FILE,
    TORCH_CACHE_FILE,
    TORCH_CUDA,
    TORCH_DECIDED,
    TORCH_KEY_VARS,
    cpuinfo_kept,
    cpuinfo_key,
    keep,
    keep_torch_facts,
    kept_cpuinfo,
    kept_torch_facts,
)

__all__ = [
    "CPUINFO_CACHE_FILE",
    "ENV_VARS",
    "FAST_PROBES",
    "PROBE_TIMEOUT_S",
    "SLOW_PROBES",
    "THREAD_ENV_VARS",
    "TORCH_CACHE_FILE",
    "TORCH_DECIDED",
    "TORCH_KEY_VARS",
    "Probe",
    "ProbeInputs",
    "cpuinfo_kept",
    "default_probes",
    "import_torch",
    "keep_torch_facts",
    "kept_torch_facts",
    "probe_environment",
]

logger = logging.getLogger(__name__)

#: A probe that has not answered by then is reported unknown. py-cpuinfo needs ~1.2 s here
#: (it runs CPUID in a child process); the whole doctor must answer in < 3 s.
PROBE_TIMEOUT_S = 2.5

#: cgroup v1 reports "no limit" as a huge number (PAGE_COUNTER_MAX pages); anything above
#: 2**60 bytes is that.
_NO_LIMIT = 1 << 60


Probe = Callable[[ProbeInputs], list[EnvFact]]


def probe_environment(
    environ: Mapping[str, str] = os.environ,
    *,
    slow: bool = False,
    probes: Iterable[tuple[str, Probe]] | None = None,
    inputs: ProbeInputs | None = None,
    timeout_s: float = PROBE_TIMEOUT_S,
) -> list[EnvFact]:
    """Run the probes concurrently, each bounded by ``timeout_s``; return their facts.

    ``slow`` adds the costly probes (py-cpuinfo's CPU flags, NVML start-up): the doctor and
    the end of a watched run use them, the first step of a run does not.
    """
    inputs = inputs or ProbeInputs(environ=environ)
    chosen = list(probes) if probes is not None else default_probes(slow=slow)
    results: dict[str, list[EnvFact]] = {}
    errors: dict[str, str] = {}
    threads = []
    for name, probe in chosen:
        thread = threading.Thread(
            target=_run_probe,
            args=(name, probe, inputs, results, errors),
            name=f"stepdoctor-probe-{name}",
            daemon=True,  # a probe that hangs must not keep the process alive
        )
        thread.start()
        threads.append((name, thread))
    facts: list[EnvFact] = []
    deadline = time.monotonic() + timeout_s
    for name, thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            facts.append(
                EnvFact(key=f"probe.{name}", value=f"timed out after {timeout_s:g} s", source=name)
            )
        elif name in errors:
            facts.append(EnvFact(key=f"probe.{name}", value=errors[name], source=name))
        else:
            facts.extend(results.get(name, []))
    return facts


def default_probes(*, slow: bool) -> list[tuple[str, Probe]]:
    """The fast probes, and with ``slow`` the costly ones too, in the order facts are listed."""
    return FAST_PROBES + (SLOW_PROBES if slow else [])


def import_torch() -> bool:
    """Import torch if installed (for the doctor, which describes it); False when it cannot."""
    try:
        import torch  # noqa: F401
    except Exception:  # not installed, or broken: the torch probe says so
        return False
    return True


def _run_probe(
    name: str,
    probe: Probe,
    inputs: ProbeInputs,
    results: dict[str, list[EnvFact]],
    errors: dict[str, str],
) -> None:
    try:
        results[name] = probe(inputs)
    except Exception as exc:  # a broken library makes facts unknown, never a crash
        logger.debug("probe %s failed", name, exc_info=True)
        errors[name] = f"unknown: {type(exc).__name__}: {exc}".strip()


def _fact(key: str, value: str | int | float | bool | None, source: str) -> EnvFact:
    return EnvFact(key=key, value=value, source=source)


def _python(inputs: ProbeInputs) -> list[EnvFact]:
    return [
        _fact("python.version", platform.python_version(), "platform"),
        _fact("platform", platform.platform(terse=True), "platform"),
    ]


def _cpu(inputs: ProbeInputs) -> list[EnvFact]:
    return [
        _fact("cpu.logical", psutil.cpu_count(logical=True), "psutil"),
        _fact("cpu.physical", psutil.cpu_count(logical=False), "psutil"),
        _fact("cpu.affinity", affinity(), "os.sched_getaffinity"),
        _fact("cpu.arch", platform.machine(), "platform"),
    ]


def _env(inputs: ProbeInputs) -> list[EnvFact]:
    return [_fact(f"env.{name}", inputs.environ.get(name), "environment") for name in ENV_VARS]


def _memory(inputs: ProbeInputs) -> list[EnvFact]:
    vm = psutil.virtual_memory()
    swap = psutil.swap_memory()
    facts = [
        _fact("mem.total_bytes", int(vm.total), "psutil"),
        _fact("mem.available_bytes", int(vm.available), "psutil"),
        _fact("mem.swap_total_bytes", int(swap.total), "psutil"),
        _fact("mem.swap_used_bytes", int(swap.used), "psutil"),
        _fact("mem.cgroup_limit_bytes", _cgroup_limit(inputs.cgroup_limits), "cgroup"),
    ]
    try:
        facts.append(_fact("shm.total_bytes", int(shutil.disk_usage(inputs.shm).total), "statvfs"))
    except OSError:
        facts.append(_fact("shm.total_bytes", None, f"{inputs.shm} is missing"))
    return facts


def _cgroup_limit(paths: Iterable[Path]) -> int | None:
    for path in paths:
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text == "max" or not text.isdigit():
            return None
        value = int(text)
        return None if value >= _NO_LIMIT else value
    return None


def _kept(inputs: ProbeInputs, prefix: str) -> list[EnvFact]:
    return [f for f in inputs.kept if f.key.startswith(prefix)]


def _pools(inputs: ProbeInputs) -> list[EnvFact]:
    if kept := _kept(inputs, "pools."):
        return kept
    from threadpoolctl import threadpool_info

    pools = threadpool_info()
    summary = ", ".join(
        f"{p.get('user_api')}/{p.get('internal_api')}:{p.get('num_threads')}" for p in pools
    )
    threads = [int(p["num_threads"]) for p in pools if isinstance(p.get("num_threads"), int)]
    return [
        _fact("pools.summary", summary or "none loaded", "threadpoolctl"),
        _fact("pools.max_threads", max(threads) if threads else None, "threadpoolctl"),
    ]


def _device_nodes(inputs: ProbeInputs) -> list[EnvFact]:
    try:
        nodes = [p.name for p in inputs.dev.iterdir() if p.name.startswith("nvidia")]
    except OSError:
        nodes = []
    gpus = [n for n in nodes if n.removeprefix("nvidia").isdigit()]
    return [_fact("gpu.device_nodes", len(gpus), f"{inputs.dev}/nvidia*")]


def _cpuinfo(inputs: ProbeInputs) -> list[EnvFact]:
    info, source = _cpu_info(inputs)
    flags = set(info.get("flags") or ())
    if not flags:
        return [_fact("probe.cpuinfo", "unknown: py-cpuinfo returned no CPU flags", "cpuinfo")]
    return [
        _fact("cpu.brand", str(info.get("brand_raw") or "?"), source),
        _fact("cpu.avx2", "avx2" in flags, source),
        _fact("cpu.avx512", "avx512f" in flags, source),
    ]


def _cpu_info(inputs: ProbeInputs) -> tuple[dict[str, Any], str]:
    """py-cpuinfo's brand and flags, and where they came from.

    py-cpuinfo runs a Python child process for ~1.2 s (1.1 s of CPU here), at the end of every
    watched run and in the doctor. The CPU does not change within a boot, so its answer is
    kept in the cache folder, named by the boot's id and py-cpuinfo's build, and read back
    by later runs of the same boot (without importing py-cpuinfo). A cache that cannot be
    read or written is passed over.
    """
    path, key = cpuinfo_key(inputs)
    kept = kept_cpuinfo(path, key)
    if kept is not None:
        return kept, "py-cpuinfo (kept from earlier this boot)"
    import cpuinfo

    info = cpuinfo.get_cpu_info()
    answer = {**key, "brand_raw": info.get("brand_raw"), "flags": list(info.get("flags") or ())}
    if answer["flags"]:
        keep(path, answer)
    return answer, "py-cpuinfo"


def _nvml(inputs: ProbeInputs) -> list[EnvFact]:
    nvml = inputs.nvml
    if nvml is None:
        driver = inputs.nvidia_driver.parent
        if not nvidia_present(inputs.dev, driver):
            return [_fact("gpu.count", 0, f"no NVIDIA driver ({driver}) or device node")]
        try:
            import pynvml
        except ImportError:
            return [_fact("probe.nvml", "unknown: nvidia-ml-py is not installed", "nvml")]
        nvml = pynvml
    try:
        nvml.nvmlInit()
    except Exception as exc:  # no driver, or a driver/library mismatch
        return [_fact("gpu.count", 0, f"NVML: {type(exc).__name__}: {exc}")]
    try:
        count = int(nvml.nvmlDeviceGetCount())
        names, caps, totals = [], [], []
        for i in range(count):
            handle = nvml.nvmlDeviceGetHandleByIndex(i)
            name = nvml.nvmlDeviceGetName(handle)
            names.append(name.decode() if isinstance(name, bytes) else str(name))
            major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
            caps.append(float(f"{major}.{minor}"))
            totals.append(int(nvml.nvmlDeviceGetMemoryInfo(handle).total))
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception as exc:  # a failed shutdown changes no fact
            logger.debug("nvmlShutdown failed: %s", exc)
    facts = [_fact("gpu.count", count, "NVML")]
    if count:
        facts += [
            _fact("gpu.names", ", ".join(names), "NVML"),
            _fact("gpu.capability", min(caps), "NVML (lowest of the GPUs)"),
            _fact("gpu.total_bytes", min(totals), "NVML (smallest of the GPUs)"),
        ]
    return facts


def _torch(inputs: ProbeInputs) -> list[EnvFact]:
    if kept := [f for f in inputs.kept if not f.key.startswith("pools.")]:
        return kept
    torch: Any = sys.modules.get("torch")
    if torch is None and inputs.import_torch:
        try:
            import torch
        except ImportError:
            return [_fact("torch.version", None, "torch is not installed")]
    if torch is None or not hasattr(torch, "get_num_threads"):
        return []
    src = "torch"
    backends = torch.backends
    cuda_available = bool(torch.cuda.is_available())
    facts = [
        _fact("torch.version", str(torch.__version__), src),
        _fact("torch.cuda_build", torch.version.cuda, "torch.version.cuda"),
        _fact("torch.cuda_available", cuda_available, src),
        _fact(
            "torch.cuda_device_count",
            int(torch.cuda.device_count()) if cuda_available else 0,
            src,
        ),
        _fact("torch.cudnn_available", bool(backends.cudnn.is_available()), src),
        _fact("torch.cudnn_enabled", bool(backends.cudnn.enabled), src),
        _fact("torch.cudnn_benchmark", bool(backends.cudnn.benchmark), src),
        _fact("torch.tf32_matmul", bool(backends.cuda.matmul.allow_tf32), src),
        _fact("torch.mkl", bool(backends.mkl.is_available()), src),
        _fact("torch.mkldnn", bool(backends.mkldnn.is_available()), src),
        _fact("torch.openmp", bool(backends.openmp.is_available()), src),
        _fact("torch.cpu_capability", str(backends.cpu.get_cpu_capability()), src),
        _fact("torch.num_threads", int(torch.get_num_threads()), src),
        _fact("torch.num_interop_threads", int(torch.get_num_interop_threads()), src),
        _fact("torch.default_dtype", str(torch.get_default_dtype()), src),
        _fact("torch.mps_available", _available(backends, "mps"), src),
        _fact("torch.xpu_available", _available(torch, "xpu"), src),
    ]
    if backends.cudnn.is_available():
        facts.append(_fact("torch.cudnn_version", backends.cudnn.version(), src))
    if cuda_available:
        caps = [torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())]
        facts.append(_fact("gpu.capability", min(float(f"{a}.{b}") for a, b in caps), TORCH_CUDA))
        if torch.cuda.is_initialized():  # the job used the GPU: its caching allocator's figures
            facts += _allocator(torch)
    return facts


def _allocator(torch: Any) -> list[EnvFact]:
    """torch's caching allocator on the current GPU: retries after freeing its cache
    (fragmentation), out-of-memory errors, peak reserved and allocated bytes."""
    stats = torch.cuda.memory_stats()
    src = "torch.cuda.memory_stats()"
    return [
        _fact("cuda.alloc_retries", int(stats.get("num_alloc_retries", 0)), src),
        _fact("cuda.ooms", int(stats.get("num_ooms", 0)), src),
        _fact("cuda.peak_reserved_bytes", int(stats.get("reserved_bytes.all.peak", 0)), src),
        _fact("cuda.peak_allocated_bytes", int(stats.get("allocated_bytes.all.peak", 0)), src),
    ]


def _available(owner: Any, name: str) -> bool:
    module = getattr(owner, name, None)
    is_available = getattr(module, "is_available", None)
    return bool(is_available()) if callable(is_available) else False


#: Cheap probes (~ms): run at a watched job's first step and at its end.
FAST_PROBES: list[tuple[str, Probe]] = [
    ("python", _python),
    ("cpu", _cpu),
    ("env", _env),
    ("memory", _memory),
    ("pools", _pools),
    ("devices", _device_nodes),
    ("torch", _torch),
]
#: Costly probes (py-cpuinfo ~1.2 s, NVML start-up): the doctor, and a watched job in the
#: background from its start.
SLOW_PROBES: list[tuple[str, Probe]] = [("cpuinfo", _cpuinfo), ("nvml", _nvml)]
