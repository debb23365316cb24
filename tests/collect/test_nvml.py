"""NvmlReader against a small injectable NVML stand-in replaying recorded-format readings."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from stepdoctor.collect.sampling.nvml import NvmlReader

DATA = json.loads((Path(__file__).parents[1] / "data" / "nvml_a100_replay.json").read_text())


class ReplayNvml:
    """The pynvml functions NvmlReader uses, answering from DATA in order."""

    def __init__(self, *, fail_init: bool = False) -> None:
        self.calls = 0
        self.fail_init = fail_init
        self.shut = False

    def nvmlInit(self) -> None:
        if self.fail_init:
            raise RuntimeError("NVML Shared Library Not Found")

    def nvmlShutdown(self) -> None:
        self.shut = True

    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, i: int) -> str:
        return f"handle{i}"

    def nvmlDeviceGetName(self, h: str) -> bytes:
        return DATA["name"].encode()

    def nvmlDeviceGetCudaComputeCapability(self, h: str) -> tuple[int, int]:
        major, minor = DATA["compute_capability"]
        return major, minor

    def _reading(self) -> dict[str, Any]:
        reading: dict[str, Any] = DATA["readings"][min(self.calls, len(DATA["readings"]) - 1)]
        return reading

    def nvmlDeviceGetUtilizationRates(self, h: str) -> SimpleNamespace:
        return SimpleNamespace(gpu=self._reading()["gpu"], memory=0)

    def nvmlDeviceGetMemoryInfo(self, h: str) -> SimpleNamespace:
        return SimpleNamespace(used=self._reading()["used"], total=DATA["total"])

    def nvmlDeviceGetComputeRunningProcesses(self, h: str) -> list[SimpleNamespace]:
        procs = [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in self._reading()["procs"]]
        self.calls += 1
        return procs


def test_readings_become_gpu_samples_with_job_and_other_processes() -> None:
    nvml = ReplayNvml()
    reader = NvmlReader.open(nvml)
    assert reader is not None
    reader._job_pids = {4242}
    (first,) = reader.read(10)
    (second,) = reader.read(20)
    assert first.name == "NVIDIA A100-SXM4-80GB"
    assert (first.util_pct, first.mem_total_bytes) == (35.0, 84990623744)
    assert [p.is_job for p in second.processes] == [True, False]
    assert second.processes[1].mem_bytes == 1073741824
    reader.close()
    assert nvml.shut


def test_no_driver_means_no_reader() -> None:
    assert NvmlReader.open(ReplayNvml(fail_init=True)) is None


@pytest.mark.parametrize("node", [None, "nvidiactl", "dxg", "driver"])
def test_pynvml_is_asked_only_where_the_kernel_shows_an_nvidia_device(
    node: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dev, driver = tmp_path / "dev", tmp_path / "proc-driver-nvidia"
    dev.mkdir()
    (dev / "null").touch()
    if node == "driver":  # the driver is loaded; its device files come with CUDA's first start
        driver.mkdir()
    elif node is not None:
        (dev / node).touch()
    installed = ReplayNvml()
    asked: list[str] = []
    installed.nvmlInit = lambda: asked.append("init")  # type: ignore[method-assign]
    monkeypatch.setitem(sys.modules, "pynvml", installed)
    reader = NvmlReader.open(dev=dev, driver=driver)
    assert asked == ([] if node is None else ["init"])
    assert (reader is not None) == (node is not None)


class ClockedNvml(ReplayNvml):
    """A GPU held below its maximum clock by its power cap and heat (the values an H100's
    nvidia-smi -q shows: max SM clock 1980 MHz), with no temperature sensor readable."""

    NVML_CLOCK_SM = 1
    NVML_TEMPERATURE_GPU = 0

    def nvmlDeviceGetClockInfo(self, h: str, kind: int) -> int:
        assert kind == self.NVML_CLOCK_SM
        return 1410

    def nvmlDeviceGetMaxClockInfo(self, h: str, kind: int) -> int:
        return 1980

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: str) -> int:
        return 0x4 | 0x20

    def nvmlDeviceGetTemperature(self, h: str, sensor: int) -> int:
        raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")


def test_clocks_and_why_they_are_low_are_read_where_nvml_has_them() -> None:
    from stepdoctor.collect.sampling.nvml import THROTTLING, clock_reasons

    reader = NvmlReader.open(ClockedNvml())
    assert reader is not None
    (sample,) = reader.read(10)
    assert (sample.sm_clock_mhz, sample.max_sm_clock_mhz) == (1410, 1980)
    assert sample.clock_reasons is not None and sample.clock_reasons & THROTTLING
    assert clock_reasons(sample.clock_reasons) == [
        "software power cap",
        "software thermal slowdown",
    ]
    assert sample.temperature_c is None  # not supported there: no reading, no error
    old = NvmlReader.open(ReplayNvml())  # a pynvml without the clock functions
    assert old is not None
    (plain,) = old.read(10)
    assert plain.sm_clock_mhz is None and plain.clock_reasons is None
