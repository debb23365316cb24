"""``stepdoctor doctor`` on this machine, and ``stepdoctor.lint`` on real models."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

import torch
from torch import nn

import stepdoctor
from stepdoctor.checkup import EXIT_CODES, checkup
from stepdoctor.model import Severity
from stepdoctor.probes.environment import ProbeInputs
from stepdoctor.render import render_checkup_text
from tests.collect.test_nvml import ReplayNvml


def test_doctor_on_this_machine_is_honest(tmp_path: Path) -> None:
    out = tmp_path / "doctor.json"
    proc = subprocess.run(
        [sys.executable, "-m", "stepdoctor", "doctor", "--json", str(out), "--width", "120"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    data = json.loads(out.read_text())
    worst = data["worst"]
    assert data["tool"] == "stepdoctor"
    assert proc.returncode == EXIT_CODES[worst], proc.stderr
    # 2 cores, no GPU: said so, and no GPU check complains about a GPU that is not there.
    assert "GPUs: none found" in proc.stdout
    assert data["facts"]["gpu.device_nodes"] == 0 and data["facts"]["torch.cuda_available"] is False
    statuses = {c["rule"]: c["status"] for c in data["checks"]}
    assert statuses["wrong-backend"] == "ok" and statuses["cudnn-disabled"] == "ok"
    # AVX-512 used where the CPU has it; its absence is worth knowing, never a warning
    facts = data["facts"]
    if "probe.cpuinfo" in facts:  # py-cpuinfo's child out of time on a busy machine
        assert statuses["cpu-features"] == "skipped", facts
    else:
        has_avx512 = facts["cpu.avx512"] and facts["torch.cpu_capability"] == "AVX512"
        assert statuses["cpu-features"] == ("ok" if has_avx512 else "info"), facts
    assert set(statuses) == {
        "competing-processes",
        "cpu-features",
        "cudnn-disabled",
        "memory-limits",
        "thread-oversubscription",
        "wrong-backend",
    }
    for key in ("python.version", "torch.version", "pools.summary", "shm.total_bytes"):
        assert key in data["facts"], key


def test_checkup_with_a_recorded_gpu_and_cpu_only_torch_is_critical(tmp_path: Path) -> None:
    dev = tmp_path / "dev"
    dev.mkdir()
    (dev / "nvidia0").touch()
    inputs = ProbeInputs(environ={}, dev=dev, nvml=ReplayNvml())
    result = checkup(inputs=inputs, readers=[], sample_window_s=0.0)
    assert result.worst is Severity.CRITICAL
    (finding,) = [f for f in result.findings if f.rule == "wrong-backend"]
    assert finding.title == "CPU-only torch on a machine with 1 NVIDIA GPU(s)"
    text = render_checkup_text(result, width=100)
    assert "critical" in text and "NVIDIA A100-SXM4-80GB" in text


def test_lint_finds_an_oversized_model_and_passes_a_small_one() -> None:
    big = nn.Sequential(nn.Linear(256, 4096), nn.ReLU(), nn.Linear(4096, 20_000)).double()
    findings = stepdoctor.lint(big, torch.randn(4, 256, dtype=torch.float64))
    rules = [f.rule for f in findings]
    assert rules == ["float64", "oversized-network"]
    oversized = findings[1]
    assert any(e.metric == "forward FLOPs per sample" for e in oversized.evidence)
    small = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    assert stepdoctor.lint(small, torch.randn(2, 16)) == []


def test_a_later_doctor_answers_from_what_the_first_one_kept_without_importing_torch(
    tmp_path: Path,
) -> None:
    code = (
        "import sys; from stepdoctor.cli import main; rc = main(sys.argv[1:]);"
        " print('torch imported:', 'torch' in sys.modules)"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    answers = []
    for n in (1, 2):
        out = tmp_path / f"doctor{n}.json"
        proc = subprocess.run(
            [sys.executable, "-c", code, "doctor", "--json", str(out)],
            capture_output=True, text=True, timeout=60, env=env,
        )  # fmt: skip
        assert proc.stdout.splitlines()[-1] == f"torch imported: {n == 1}", proc.stderr
        answers.append(json.loads(out.read_text()))
    first, later = answers
    decided = {k: v for k, v in first["facts"].items() if k.startswith(("torch.", "pools."))}
    assert decided["torch.version"] == torch.__version__
    assert {k: later["facts"][k] for k in decided} == decided
    assert later["fact_sources"]["torch.version"] == "torch (kept from earlier this boot)"
    # the machine's load now, and the CPU's flags where py-cpuinfo's child ran out of time
    # (a busy machine): those the first doctor skipped saying so, and a later one may read
    timed_out = "probe.cpuinfo" in first["facts"]
    moving = {"competing-processes"} | ({"cpu-features"} if timed_out else set())
    assert [c["status"] for c in later["checks"] if c["rule"] not in moving] == [
        c["status"] for c in first["checks"] if c["rule"] not in moving
    ]
    if timed_out:
        (cpu,) = (c for c in first["checks"] if c["rule"] == "cpu-features")
        assert cpu["status"] == "skipped" and "flags were not read" in cpu["reason"]


class _Seen:
    """Where checkup's steps fall: the CPU readings, the NVML probe, the caller's work."""

    name = "seen"

    def __init__(self) -> None:
        self.order: list[str] = []

    def read(self, t_ns: int) -> list[object]:
        self.order.append("read")
        return []

    def nvmlInit(self) -> None:  # the NVML probe's first call: the probes are running
        self.order.append("probes")
        raise RuntimeError("no driver here")


@pytest.mark.serial  # py-cpuinfo's child process, timed out under load, would say nothing
def test_the_cpu_window_opens_before_the_probes_unless_py_cpuinfo_must_run(
    tmp_path: Path,
) -> None:
    boot = tmp_path / "boot_id"
    boot.write_text("1\n")
    orders = []
    for _ in range(2):  # the first asks py-cpuinfo (a child process) and keeps its answer
        seen = _Seen()
        inputs = ProbeInputs(environ={}, nvml=seen, cache_dir=tmp_path, boot_id=boot)
        result = checkup(
            inputs=inputs, readers=[seen], describe_torch=False, sample_window_s=0.05,  # type: ignore[list-item]
            while_measuring=lambda: seen.order.append("caller's work"),  # noqa: B023
        )  # fmt: skip
        assert result.facts
        orders.append(seen.order)
    assert orders == [
        ["probes", "read", "caller's work", "read"],  # py-cpuinfo's child is not "another process"
        ["read", "probes", "caller's work", "read"],
    ]
