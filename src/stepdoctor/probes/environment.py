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

import importlib.util
import json
import logging
import os
import platform
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from stepdoctor.model import EnvFact

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

#: Variables that size the native thread pools torch and numpy use.
THREAD_ENV_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
#: Every variable reported: thread pools, the CPU kernel level torch may be forced down to,
#: GPU visibility, and how many ranks share the machine (torchrun sets LOCAL_WORLD_SIZE).
ENV_VARS = (
    *THREAD_ENV_VARS,
    "ATEN_CPU_CAPABILITY",
    "CUDA_VISIBLE_DEVICES",
    "PYTORCH_CUDA_ALLOC_CONF",
    "LOCAL_WORLD_SIZE",
    "WORLD_SIZE",
)
#: py-cpuinfo's answer, kept for the rest of the boot in the user's cache folder.
CPUINFO_CACHE_FILE = "cpuinfo.json"
#: The facts a process's ``import torch`` decides (torch's build, its defaults, the thread
#: pools it loads), and where the doctor keeps them for the rest of the boot: a later doctor
#: answers without importing torch (2.4-2.9 s here), as long as nothing that decides them has
#: changed (``kept_torch_facts``).
TORCH_DECIDED = ("torch.", "pools.")
TORCH_CACHE_FILE = "torch-facts.json"
#: Besides ``ENV_VARS``, variables that change what ``import torch`` decides: TF32 forced on,
#: ROCm's devices, libgomp's thread cap, which libraries load.
TORCH_KEY_VARS = (
    *ENV_VARS,
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "OMP_THREAD_LIMIT",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
)
#: Device files of GPUs (NVIDIA's, WSL 2's, AMD's): one appearing or going changes the key.
_GPU_NODES = ("nvidia", "dxg", "kfd")
#: The source of the torch probe's ``gpu.capability`` (its CUDA devices'): kept with the rest.
_TORCH_CUDA = "torch.cuda"
#: A probe that has not answered by then is reported unknown. py-cpuinfo needs ~1.2 s here
#: (it runs CPUID in a child process); the whole doctor must answer in < 3 s.
PROBE_TIMEOUT_S = 2.5

_CGROUP_LIMITS = (
    Path("/sys/fs/cgroup/memory.max"),  # cgroup v2
    Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"),  # cgroup v1
)
#: cgroup v1 reports "no limit" as a huge number (PAGE_COUNTER_MAX pages); anything above
#: 2**60 bytes is that.
_NO_LIMIT = 1 << 60


@dataclass(frozen=True)
class ProbeInputs:
    """Where probes read from: the seams tests replace."""

    environ: Mapping[str, str]
    dev: Path = Path("/dev")
    shm: Path = Path("/dev/shm")
    cgroup_limits: tuple[Path, ...] = _CGROUP_LIMITS
    nvml: Any = None
    """A pynvml-like module; None imports pynvml if installed."""
    import_torch: bool = False
    """Import torch to describe it (the doctor); a watched job's torch is used only if loaded."""
    cache_dir: Path | None = None
    """Where py-cpuinfo's answer is kept for the rest of the boot; None: the user's cache
    folder (``$XDG_CACHE_HOME/stepdoctor``, else ``~/.cache/stepdoctor``, from ``environ``)."""
    boot_id: Path = Path("/proc/sys/kernel/random/boot_id")
    """Names this boot (Linux): a cached answer from another boot is not used."""
    nvidia_driver: Path = Path("/proc/driver/nvidia/version")
    """The NVIDIA driver's version (Linux): part of what decides torch's CUDA facts."""
    kept: tuple[EnvFact, ...] = ()
    """Facts a fresh ``import torch`` decides, kept by an earlier doctor
    (``kept_torch_facts``): the pools and torch probes answer with these."""


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
        _fact("cpu.affinity", _affinity(), "os.sched_getaffinity"),
        _fact("cpu.arch", platform.machine(), "platform"),
    ]


def _affinity() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


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
    kept in the cache folder, named by the boot's id and py-cpuinfo's version, and read back
    by later runs of the same boot. A cache that cannot be read or written is passed over.
    """
    import cpuinfo

    path, key = _cpuinfo_key(inputs)
    kept = _kept_cpuinfo(path, key)
    if kept is not None:
        return kept, "py-cpuinfo (kept from earlier this boot)"
    info = cpuinfo.get_cpu_info()
    answer = {**key, "brand_raw": info.get("brand_raw"), "flags": list(info.get("flags") or ())}
    if answer["flags"]:
        _keep(path, answer)
    return answer, "py-cpuinfo"


def _cpuinfo_key(inputs: ProbeInputs) -> tuple[Path | None, dict[str, str | None]]:
    """Where py-cpuinfo's answer is kept (None: nowhere, this boot has no id) and its key."""
    import cpuinfo

    version = str(getattr(cpuinfo, "CPUINFO_VERSION_STRING", "?"))
    boot = _read_text(inputs.boot_id)
    path = _cache_path(inputs, CPUINFO_CACHE_FILE) if boot is not None else None
    return path, {"boot_id": boot, "cpuinfo_version": version}


def _kept_cpuinfo(path: Path | None, key: Mapping[str, object]) -> dict[str, Any] | None:
    kept = _read_kept(path, key)
    flags = None if kept is None else kept.get("flags")
    if isinstance(flags, list) and all(isinstance(flag, str) for flag in flags):
        return kept
    return None


def cpuinfo_kept(inputs: ProbeInputs) -> bool:
    """Whether the cpuinfo probe will answer from what was kept earlier this boot (without
    py-cpuinfo's child process); False when that cannot be told (py-cpuinfo broken)."""
    try:
        return _kept_cpuinfo(*_cpuinfo_key(inputs)) is not None
    except Exception:  # the probe itself reports a broken py-cpuinfo as unknown
        return False


def _cache_path(inputs: ProbeInputs, name: str) -> Path | None:
    folder = inputs.cache_dir or _user_cache_dir(inputs.environ)
    return None if folder is None else folder / name


def _read_kept(path: Path | None, key: Mapping[str, object]) -> dict[str, Any] | None:
    """The answer kept at ``path`` if it was kept under ``key``; None if there is none, it was
    kept under another key, or it cannot be read."""
    if path is None:
        return None
    try:
        kept = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None  # none yet, or unreadable: ask again
    if isinstance(kept, dict) and all(kept.get(k) == v for k, v in key.items()):
        return kept
    return None


def _keep(path: Path | None, answer: Mapping[str, object]) -> None:
    """Write ``answer`` (its key included) to ``path``; a reader never sees half a file, and a
    folder that cannot be written is passed over."""
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(f"{path.name}.{os.getpid()}.part")
        part.write_text(json.dumps(answer), "utf-8")
        os.replace(part, path)
    except OSError as exc:
        logger.debug("answer not kept in %s: %s", path, exc)


def _torch_install(inputs: ProbeInputs) -> dict[str, object] | None:
    """What decides the facts a fresh ``import torch`` gives, read without importing it: this
    boot, this interpreter, torch's installed files and the libraries it loads (theirs and the
    ``nvidia-*`` wheels': sizes and times, which a reinstall or an upgrade changes), the
    variables that size its threads, pick its devices or its libraries (``TORCH_KEY_VARS``),
    the GPU device files and the NVIDIA driver's version, the CPUs the process may use, and
    stepdoctor's version (which facts it reads). None when torch is not installed or this boot
    has no id."""
    boot = _read_text(inputs.boot_id)
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if boot is None or spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations)))
    files = [
        folder / "__init__.py",
        folder / "version.py",
        *sorted(folder.glob("_C.*")),
        *sorted(folder.glob("lib/*")),
        *sorted(folder.parent.glob("nvidia/*/lib/*")),
    ]
    stats = []
    for path in files:
        try:
            st = path.stat()
        except OSError:
            continue
        stats.append([str(path), st.st_size, st.st_mtime_ns])
    try:
        devices = sorted(p.name for p in inputs.dev.iterdir() if p.name.startswith(_GPU_NODES))
    except OSError:
        devices = []
    from stepdoctor._version import __version__

    return {
        "boot_id": boot,
        "python": sys.executable,
        "stepdoctor": __version__,
        "torch_files": stats,
        "environ": {name: inputs.environ.get(name) for name in TORCH_KEY_VARS},
        "devices": devices,
        "nvidia_driver": _read_text(inputs.nvidia_driver),
        "affinity": _affinity(),
    }


def _torch_decided(fact: EnvFact) -> bool:
    """A fact the torch probe or the thread-pool probe gives after a fresh ``import torch``."""
    return fact.key.startswith(TORCH_DECIDED) or fact.source.startswith(_TORCH_CUDA)


def kept_torch_facts(inputs: ProbeInputs) -> list[EnvFact] | None:
    """The facts an earlier doctor of this boot read after importing torch (``_torch_decided``),
    if nothing that decides them has changed since (``_torch_install``); else None."""
    key = _torch_install(inputs)
    kept = _read_kept(_cache_path(inputs, TORCH_CACHE_FILE), key) if key else None
    rows = kept.get("facts") if kept else None
    if not isinstance(rows, list):
        return None
    try:
        facts = [
            EnvFact(key=str(k), value=v, source=f"{src} (kept from earlier this boot)")
            for k, v, src in rows
            if isinstance(src, str) and (v is None or isinstance(v, str | int | float))
        ]
    except (TypeError, ValueError):
        return None
    facts = [f for f in facts if _torch_decided(f)]
    return facts if any(f.key == "torch.version" for f in facts) else None


def keep_torch_facts(inputs: ProbeInputs, facts: Iterable[EnvFact]) -> None:
    """Keep the facts a fresh ``import torch`` decided (the doctor's, read right after it) for
    later doctors of this boot."""
    key = _torch_install(inputs)
    rows = [[f.key, f.value, f.source] for f in facts if _torch_decided(f)]
    if key and any(row[0] == "torch.version" for row in rows):
        _keep(_cache_path(inputs, TORCH_CACHE_FILE), {**key, "facts": rows})


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text("ascii").strip() or None
    except (OSError, ValueError):
        return None


def _user_cache_dir(environ: Mapping[str, str]) -> Path | None:
    """``$XDG_CACHE_HOME/stepdoctor``, else ``~/.cache/stepdoctor``; None without a home."""
    base = environ.get("XDG_CACHE_HOME") or (
        str(Path(environ["HOME"]) / ".cache") if environ.get("HOME") else None
    )
    return None if not base else Path(base) / "stepdoctor"


def _nvml(inputs: ProbeInputs) -> list[EnvFact]:
    nvml = inputs.nvml
    if nvml is None:
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
        facts.append(_fact("gpu.capability", min(float(f"{a}.{b}") for a, b in caps), _TORCH_CUDA))
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
