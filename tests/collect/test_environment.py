"""Environment probes: real readings on this machine, recorded ones through the seams, and
probes that fail or hang."""

from __future__ import annotations

import json
import os
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from stepdoctor.model import EnvFact
from stepdoctor.probes.environment import (
    CPUINFO_CACHE_FILE,
    FAST_PROBES,
    SLOW_PROBES,
    TORCH_CACHE_FILE,
    TORCH_DECIDED,
    ProbeInputs,
    keep_torch_facts,
    kept_torch_facts,
    probe_environment,
)
from tests.collect.test_nvml import ReplayNvml
from tests.marks import needs_torch


def _facts(facts: list[EnvFact]) -> dict[str, object]:
    return {f.key: f.value for f in facts}


@needs_torch
def test_fast_probes_describe_this_machine_honestly() -> None:
    import torch  # noqa: F401  (a watched job has torch loaded: its build is described)

    facts = _facts(probe_environment({"OMP_NUM_THREADS": "3"}))
    assert facts["cpu.affinity"] == len(os.sched_getaffinity(0))
    assert facts["env.OMP_NUM_THREADS"] == "3" and facts["env.MKL_NUM_THREADS"] is None
    assert isinstance(facts["mem.total_bytes"], int) and facts["mem.total_bytes"] > 0
    assert facts["gpu.device_nodes"] == 0  # this machine has no GPU
    assert facts["torch.cuda_build"] is None and facts["torch.cuda_available"] is False
    assert facts["torch.cpu_capability"] in ("DEFAULT", "AVX2", "AVX512")
    assert "openmp" in str(facts["pools.summary"])


def test_cgroup_shm_and_device_nodes_come_from_the_seams(tmp_path: Path) -> None:
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
        (dev / name).touch()
    v2 = tmp_path / "memory.max"
    v2.write_text("8589934592\n")
    inputs = ProbeInputs(environ={}, dev=dev, shm=tmp_path / "no-shm", cgroup_limits=(v2,))
    facts = _facts(probe_environment(inputs=inputs))
    assert facts["gpu.device_nodes"] == 2  # control nodes are not GPUs
    assert facts["mem.cgroup_limit_bytes"] == 8 * 2**30
    assert facts["shm.total_bytes"] is None
    v2.write_text("max\n")
    assert _facts(probe_environment(inputs=inputs))["mem.cgroup_limit_bytes"] is None
    v1 = tmp_path / "limit_in_bytes"
    v1.write_text(str(9223372036854771712))  # cgroup v1's "no limit"
    inputs = ProbeInputs(environ={}, cgroup_limits=(tmp_path / "missing", v1))
    assert _facts(probe_environment(inputs=inputs))["mem.cgroup_limit_bytes"] is None


def test_nvml_probe_reads_recorded_a100_values() -> None:
    inputs = ProbeInputs(environ={}, nvml=ReplayNvml())
    facts = _facts(
        probe_environment(probes=[p for p in SLOW_PROBES if p[0] == "nvml"], inputs=inputs)
    )
    assert facts["gpu.count"] == 1
    assert facts["gpu.names"] == "NVIDIA A100-SXM4-80GB"
    assert facts["gpu.capability"] == 8.0 and facts["gpu.total_bytes"] == 84990623744


def test_nvml_driver_failure_means_no_gpu_with_the_reason() -> None:
    inputs = ProbeInputs(environ={}, nvml=ReplayNvml(fail_init=True))
    (fact,) = probe_environment(probes=[p for p in SLOW_PROBES if p[0] == "nvml"], inputs=inputs)
    assert fact.key == "gpu.count" and fact.value == 0
    assert "NVML Shared Library Not Found" in fact.source


def test_cpuinfo_probe_reads_this_cpu() -> None:
    facts = _facts(probe_environment(probes=[p for p in SLOW_PROBES if p[0] == "cpuinfo"]))
    assert isinstance(facts["cpu.avx2"], bool) and isinstance(facts["cpu.avx512"], bool)


def test_a_failing_probe_is_unknown_with_its_reason_and_the_rest_still_answer() -> None:
    def broken(inputs: ProbeInputs) -> list[EnvFact]:
        raise OSError("no /proc here")

    facts = probe_environment(probes=[("broken", broken), *FAST_PROBES[:1]])
    values = _facts(facts)
    assert values["probe.broken"] == "unknown: OSError: no /proc here"
    assert "python.version" in values


def test_a_hanging_probe_costs_at_most_the_timeout() -> None:
    release = threading.Event()

    def hangs(inputs: ProbeInputs) -> list[EnvFact]:
        release.wait(30)
        return []

    try:
        facts = _facts(probe_environment(probes=[("hangs", hangs)], timeout_s=0.2))
        assert facts == {"probe.hangs": "timed out after 0.2 s"}
        assert any(t.name == "stepdoctor-probe-hangs" for t in threading.enumerate())
    finally:
        release.set()
        for thread in threading.enumerate():
            if thread.name == "stepdoctor-probe-hangs":
                thread.join(5)


def _cpuinfo_facts(inputs: ProbeInputs) -> list[EnvFact]:
    return probe_environment(probes=[p for p in SLOW_PROBES if p[0] == "cpuinfo"], inputs=inputs)


# py-cpuinfo's first answer must come within the probe's timeout: beside no other test
@pytest.mark.serial
def test_cpuinfos_answer_is_kept_for_the_boot_and_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import cpuinfo

    boot = tmp_path / "boot_id"
    boot.write_text("11111111-2222\n")
    inputs = ProbeInputs(environ={}, cache_dir=tmp_path / "cache", boot_id=boot)
    first = _cpuinfo_facts(inputs)  # the real py-cpuinfo, this machine's CPU
    assert {f.source for f in first} == {"py-cpuinfo"}
    kept = json.loads((tmp_path / "cache" / CPUINFO_CACHE_FILE).read_text())
    assert kept["boot_id"] == "11111111-2222" and kept["flags"]

    def not_again() -> dict[str, object]:
        raise AssertionError("py-cpuinfo asked again within the boot")

    monkeypatch.setattr(cpuinfo, "get_cpu_info", not_again)
    again = _cpuinfo_facts(inputs)
    assert [(f.key, f.value) for f in again] == [(f.key, f.value) for f in first]
    assert {f.source for f in again} == {"py-cpuinfo (kept from earlier this boot)"}

    # another boot (or a kept file that is not an answer) asks py-cpuinfo again
    answer = {"brand_raw": "Another CPU", "flags": ["avx2"]}
    monkeypatch.setattr(cpuinfo, "get_cpu_info", lambda: answer)
    boot.write_text("33333333-4444\n")
    assert _facts(_cpuinfo_facts(inputs))["cpu.brand"] == "Another CPU"
    (tmp_path / "cache" / CPUINFO_CACHE_FILE).write_text('{"boot_id": "33333333-4444", "fl')
    assert _facts(_cpuinfo_facts(inputs))["cpu.avx2"] is True


def test_cpuinfo_without_a_writable_cache_or_a_boot_id_still_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import cpuinfo

    monkeypatch.setattr(cpuinfo, "get_cpu_info", lambda: {"brand_raw": "X", "flags": ["avx2"]})
    blocked = tmp_path / "file"
    blocked.write_text("")  # a file where the cache folder should go
    boot = tmp_path / "boot_id"
    boot.write_text("1\n")
    for inputs in (
        ProbeInputs(environ={}, cache_dir=blocked / "cache", boot_id=boot),
        ProbeInputs(environ={}, cache_dir=tmp_path / "c", boot_id=tmp_path / "no-such-file"),
        ProbeInputs(environ={}, boot_id=boot),  # no HOME, no XDG_CACHE_HOME: no folder
    ):
        assert _facts(_cpuinfo_facts(inputs))["cpu.avx2"] is True
    assert not (tmp_path / "c").exists()  # without a boot id nothing is kept


def _torch_facts(rows: list[tuple[str, object]]) -> list[EnvFact]:
    return [EnvFact(key=k, value=v, source="torch") for k, v in rows]  # type: ignore[arg-type]


@needs_torch
def test_what_import_torch_decides_is_kept_until_something_that_decides_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    boot, dev = tmp_path / "boot_id", tmp_path / "dev"
    boot.write_text("1\n")
    dev.mkdir()
    inputs = ProbeInputs(
        environ={"OMP_NUM_THREADS": "2"}, cache_dir=tmp_path, boot_id=boot, dev=dev,
        nvidia_driver=tmp_path / "no-driver",
    )  # fmt: skip
    assert kept_torch_facts(inputs) is None  # nothing kept yet
    facts = _torch_facts(
        [("torch.version", "2.13.0+cpu"), ("torch.num_threads", 2),
         ("pools.summary", "openmp/openmp:2"), ("mem.total_bytes", 1)]
    )  # fmt: skip
    facts.append(EnvFact(key="gpu.capability", value=9.0, source="torch.cuda"))
    facts.append(EnvFact(key="gpu.capability", value=9.0, source="NVML (lowest of the GPUs)"))
    keep_torch_facts(inputs, facts)
    kept = kept_torch_facts(inputs)
    assert kept is not None
    assert [(f.key, f.value, f.source) for f in kept] == [
        (f.key, f.value, f"{f.source} (kept from earlier this boot)")
        for f in facts[:3] + facts[4:5]
    ]
    # the pools and torch probes answer with what was kept
    answered = probe_environment(probes=FAST_PROBES, inputs=replace(inputs, kept=tuple(kept)))
    assert set(kept) <= set(answered)
    assert {f for f in answered if f.key.startswith(TORCH_DECIDED)} <= set(kept)
    # each thing that decides them, changed, asks torch again
    assert kept_torch_facts(replace(inputs, environ={"OMP_NUM_THREADS": "1"})) is None
    tf32 = {"OMP_NUM_THREADS": "2", "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": "1"}
    assert kept_torch_facts(replace(inputs, environ=tf32)) is None
    (dev / "nvidia0").touch()  # a GPU's device file appears (a container given a GPU)
    assert kept_torch_facts(inputs) is None
    (dev / "nvidia0").unlink()
    (tmp_path / "no-driver").write_text("NVRM version: 550.54\n")  # a driver loaded
    assert kept_torch_facts(inputs) is None
    (tmp_path / "no-driver").unlink()
    assert kept_torch_facts(inputs) is not None
    boot.write_text("2\n")
    assert kept_torch_facts(inputs) is None
    boot.write_text("1\n")
    import torch

    version_py = Path(torch.__file__).with_name("version.py")
    stat = version_py.stat()
    real_stat = Path.stat

    def reinstalled(path: Path, **kw: object) -> os.stat_result:
        st = real_stat(path, **kw)  # type: ignore[arg-type]
        if path == version_py:
            return os.stat_result((*st[:8], st.st_mtime + 1, st[9]))
        return st

    with monkeypatch.context() as patched:
        patched.setattr(Path, "stat", reinstalled)
        assert kept_torch_facts(inputs) is None
    assert version_py.stat() == stat and kept_torch_facts(inputs) is not None
    (tmp_path / TORCH_CACHE_FILE).write_text('{"facts": [["torch.version"')  # cut short
    assert kept_torch_facts(inputs) is None
    keep_torch_facts(inputs, _torch_facts([("pools.summary", "none loaded")]))  # no torch: not kept
    assert kept_torch_facts(inputs) is None


def test_without_torch_installed_nothing_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    boot = tmp_path / "boot_id"
    boot.write_text("1\n")
    inputs = ProbeInputs(environ={}, cache_dir=tmp_path, boot_id=boot)
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    keep_torch_facts(inputs, _torch_facts([("torch.version", "2.13.0+cpu")]))
    assert not (tmp_path / TORCH_CACHE_FILE).exists() and kept_torch_facts(inputs) is None


def test_a_kept_cpuinfo_answer_is_read_without_importing_py_cpuinfo(tmp_path: Path) -> None:
    """py-cpuinfo's import (~30 ms, with the multiprocessing it loads) is left to the run that
    asks it: one that reads its kept answer does not import it. The answer is kept under the
    installed py-cpuinfo's build (its module file), which an upgrade changes."""
    import subprocess
    import sys

    from stepdoctor.probes.kept import cpuinfo_key, keep

    boot = tmp_path / "boot_id"
    boot.write_text("55555555-6666\n")
    inputs = ProbeInputs(environ={}, cache_dir=tmp_path / "cache", boot_id=boot)
    path, key = cpuinfo_key(inputs)
    assert path is not None and key["cpuinfo_version"] not in (None, "?")
    keep(path, {**key, "brand_raw": "A kept CPU", "flags": ["avx2"]})
    probe = (
        "import sys; from pathlib import Path; "
        "from stepdoctor.probes.environment import SLOW_PROBES, probe_environment; "
        "from stepdoctor.probes.inputs import ProbeInputs; "
        f"inputs = ProbeInputs(environ={{}}, cache_dir=Path({str(tmp_path / 'cache')!r}), "
        f"boot_id=Path({str(boot)!r})); "
        "facts = probe_environment(probes=[p for p in SLOW_PROBES if p[0] == 'cpuinfo'], "
        "inputs=inputs); "
        "print({f.key: f.value for f in facts}['cpu.brand'], 'cpuinfo' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.split() == ["A", "kept", "CPU", "False"], out.stderr[-2000:]


def test_without_an_nvidia_driver_or_device_node_nvml_is_not_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NVML cannot start without the driver or a device node: no GPU, said so, and pynvml
    (~24 ms of each watched job's start) is not imported."""
    import sys

    monkeypatch.setitem(sys.modules, "pynvml", None)  # an import would fail
    (tmp_path / "dev").mkdir()
    inputs = ProbeInputs(
        environ={}, dev=tmp_path / "dev", nvidia_driver=tmp_path / "no-driver" / "version"
    )
    nvml = [p for p in SLOW_PROBES if p[0] == "nvml"]
    (fact,) = probe_environment(probes=nvml, inputs=inputs)
    assert fact.key == "gpu.count" and fact.value == 0 and "no NVIDIA driver" in fact.source
    (tmp_path / "dev" / "nvidiactl").touch()  # the driver's control node: NVML is asked
    (fact,) = probe_environment(probes=nvml, inputs=inputs)
    assert fact.key == "probe.nvml" and "nvidia-ml-py is not installed" in str(fact.value)
