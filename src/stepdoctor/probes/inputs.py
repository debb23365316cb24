"""Where the environment probes read from (``ProbeInputs``: the seams tests replace), and the
variables they report."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stepdoctor.model import EnvFact

__all__ = [
    "ENV_VARS",
    "NVIDIA_DEVICE_NODES",
    "THREAD_ENV_VARS",
    "ProbeInputs",
    "affinity",
    "nvidia_present",
    "read_text",
]

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
#: The device files through which NVML reaches a GPU: the driver's control node (Linux, and
#: containers given a GPU), or WSL 2's GPU paravirtualisation node.
NVIDIA_DEVICE_NODES = ("nvidiactl", "dxg")
_CGROUP_LIMITS = (
    Path("/sys/fs/cgroup/memory.max"),  # cgroup v2
    Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"),  # cgroup v1
)


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


def affinity() -> int:
    """How many CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def read_text(path: Path) -> str | None:
    """The file's stripped ASCII text; None if it is missing, empty or unreadable."""
    try:
        return path.read_text("ascii").strip() or None
    except (OSError, ValueError):
        return None


def nvidia_present(dev: Path, driver: Path) -> bool:
    """Whether the kernel shows an NVIDIA driver (its ``driver`` folder, e.g.
    ``/proc/driver/nvidia``) or a device node (``NVIDIA_DEVICE_NODES`` under ``dev``; the
    driver may create them only when CUDA or NVML first starts). Without either NVML cannot
    start, and importing pynvml (~24 ms) to learn so is not worth it."""
    return driver.exists() or any((dev / node).exists() for node in NVIDIA_DEVICE_NODES)
