"""GPU readings through NVML (nvidia-ml-py), with the NVML module injectable for tests.

``NvmlReader(nvml=...)`` takes any object with pynvml's functions; by default it imports
``pynvml`` (the ``[gpu]`` extra). ``NvmlReader.open()`` returns ``None`` where there is no
NVIDIA driver or no GPU, so a CPU machine simply has no GPU reader.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection
from pathlib import Path
from typing import Any

import psutil

from stepdoctor.model import GpuProcess, GpuSample, SystemSample
from stepdoctor.probes.inputs import nvidia_present

__all__ = [
    "CLOCK_REASONS",
    "IDLE",
    "THROTTLING",
    "NvmlReader",
    "clock_reasons",
]

#: NVML's clock event reasons (``nvmlClocksEventReason*``, formerly ``ClocksThrottleReason*``):
#: why the SM clock is below its maximum.
CLOCK_REASONS = {
    0x1: "idle",
    0x2: "application clocks setting",
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x10: "sync boost",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake",
    0x100: "display clock setting",
}
#: The reasons that slow a busy GPU against its will: power and heat.
THROTTLING = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
#: Nothing to run: the clock is down for want of work.
IDLE = 0x1


#: The job's process tree (a scan of /proc) is looked up at most this often; a GPU process
#: that starts in between is named at the next look-up.
TREE_EVERY_NS = 1_000_000_000

logger = logging.getLogger(__name__)


class NvmlReader:
    """Utilisation, memory and processes of every visible GPU.

    Args:
        nvml: the pynvml module (or a stand-in with the same functions), already initialised.
        job_pids: returns the pids of the job's process tree (to tell the job from others).
    """

    name = "nvml"

    def __init__(self, nvml: Any, job_pids: Collection[int] | None = None) -> None:
        self._nvml = nvml
        self._job_pids = job_pids
        count = nvml.nvmlDeviceGetCount()
        self._handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        self._names = [_text(nvml.nvmlDeviceGetName(h)) for h in self._handles]
        self._tree: set[int] = set()
        self._tree_at: int | None = None
        self._proc_names: dict[int, str] = {}

    @classmethod
    def open(
        cls,
        nvml: Any | None = None,
        dev: Path = Path("/dev"),
        driver: Path = Path("/proc/driver/nvidia"),
    ) -> NvmlReader | None:
        """Return a reader for this machine's GPUs, or None where NVML or a GPU is missing.

        Without ``nvml`` (pynvml-like), pynvml is imported only where the kernel shows an NVIDIA
        driver or device (``nvidia_present``)."""
        if nvml is None:
            if not nvidia_present(dev, driver):
                return None
            try:
                import pynvml
            except ImportError:
                return None
            nvml = pynvml
        try:
            nvml.nvmlInit()
            reader = cls(nvml)
        except Exception as exc:  # NVMLError has many subclasses; any means "no GPU here"
            logger.debug("no NVML: %s", exc)
            return None
        return reader if reader._handles else None

    def close(self) -> None:
        """Shut NVML down."""
        try:
            self._nvml.nvmlShutdown()
        except Exception as exc:  # a failed shutdown must not break the job
            logger.debug("nvmlShutdown failed: %s", exc)

    def read(self, t_ns: int) -> list[SystemSample | GpuSample]:
        """Read every GPU once."""
        nvml = self._nvml
        job = self._job(t_ns)
        samples: list[SystemSample | GpuSample] = []
        for index, handle in enumerate(self._handles):
            util = nvml.nvmlDeviceGetUtilizationRates(handle)
            mem = nvml.nvmlDeviceGetMemoryInfo(handle)
            procs = []
            for proc in nvml.nvmlDeviceGetComputeRunningProcesses(handle):
                used = getattr(proc, "usedGpuMemory", None)
                procs.append(
                    GpuProcess(
                        pid=int(proc.pid),
                        name=self._process_name(int(proc.pid)),
                        mem_bytes=int(used) if isinstance(used, int) else None,
                        is_job=int(proc.pid) in job,
                    )
                )
            samples.append(
                GpuSample(
                    t_ns=t_ns,
                    index=index,
                    name=self._names[index],
                    util_pct=float(util.gpu),
                    mem_used_bytes=int(mem.used),
                    mem_total_bytes=int(mem.total),
                    processes=tuple(procs),
                    **self._clocks(handle),
                )
            )
        return samples

    def _clocks(self, handle: object) -> dict[str, int | None]:
        """The SM clock, its maximum, why it is lower and the temperature; a reading the
        driver or GPU does not support is None."""
        nvml = self._nvml
        sm = getattr(nvml, "NVML_CLOCK_SM", 1)
        reasons = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )
        return {
            "sm_clock_mhz": _optional(getattr(nvml, "nvmlDeviceGetClockInfo", None), handle, sm),
            "max_sm_clock_mhz": _optional(
                getattr(nvml, "nvmlDeviceGetMaxClockInfo", None), handle, sm
            ),
            "clock_reasons": _optional(reasons, handle),
            "temperature_c": _optional(
                getattr(nvml, "nvmlDeviceGetTemperature", None),
                handle,
                getattr(nvml, "NVML_TEMPERATURE_GPU", 0),
            ),
        }

    def _job(self, t_ns: int) -> set[int]:
        if self._job_pids is not None:
            return set(self._job_pids)
        if self._tree_at is None or t_ns - self._tree_at >= TREE_EVERY_NS:
            self._tree_at = t_ns
            self._tree = _tree_pids()
            self._proc_names.clear()  # pids are reused: names are trusted for a second
        return self._tree

    def _process_name(self, pid: int) -> str:
        name = self._proc_names.get(pid)
        if name is None:
            name = self._proc_names[pid] = _process_name(pid)
        return name


def clock_reasons(mask: int) -> list[str]:
    """The names of the reasons set in ``mask``."""
    return [name for bit, name in CLOCK_REASONS.items() if mask & bit]


def _optional(read: Any, *args: object) -> int | None:
    """``read(*args)`` as an int, None where NVML (or its version here) does not have it."""
    if read is None:
        return None
    try:
        return int(read(*args))
    except Exception:  # NVMLError_NotSupported and kin, or a stand-in without the function
        return None


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _process_name(pid: int) -> str:
    try:
        return str(psutil.Process(pid).name())
    except psutil.Error:
        return "?"


def _tree_pids() -> set[int]:
    me = psutil.Process(os.getpid())
    try:
        return {me.pid, *(c.pid for c in me.children(recursive=True))}
    except psutil.Error:
        return {me.pid}
