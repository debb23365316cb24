"""The GPU zoo (tests/scenarios_gpu/) and its runner (benchmarks/gpu_zoo.py), on this CPU:
every job and its fixed twin train at their smoke sizes (the GPU's sizes need a GPU), the
catalog lists every script, and the runner's table says what each run found."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.benchmarks._load import benchmark
from tests.marks import needs_torch

ZOO = Path(__file__).parents[1] / "scenarios_gpu"


@pytest.fixture(scope="module")
def gpu_zoo() -> ModuleType:
    """benchmarks/gpu_zoo.py (it puts the zoo's folder on sys.path)."""
    return benchmark("gpu_zoo")


def test_the_catalog_lists_every_job(gpu_zoo: ModuleType) -> None:
    scripts = {p.name for p in ZOO.glob("[gh][0-9]*.py")}
    assert scripts == set(gpu_zoo.FAULTS) | set(gpu_zoo.HEALTHY)
    assert all(name.startswith("g") for name in gpu_zoo.FAULTS)
    assert all(name.startswith("h") for name in gpu_zoo.HEALTHY)


@needs_torch
@pytest.mark.parametrize("script", sorted(p.name for p in ZOO.glob("[gh][0-9]*.py")))
def test_each_job_and_its_twin_train(gpu_zoo: ModuleType, script: str) -> None:
    import importlib

    module = importlib.import_module(script.removesuffix(".py"))
    assert sys.modules["_gpu"].SMOKE  # no GPU here: the smoke sizes
    for fixed in (False, True):
        rate = module.run(fixed)
        assert math.isfinite(rate) and rate > 0, (script, fixed, rate)


def test_the_table_gives_each_jobs_gain_and_loud_findings(gpu_zoo: ModuleType) -> None:
    gains = {"g07_small_batch.py": {"gain": 41.5}, "g03_pageable_copies.py": {"error": "OOM"}}
    runs = {
        "g07_small_batch.0": {
            "returncode": 0,
            "findings": [
                {"rule": "gpu-idle", "severity": "critical", "estimated_speedup": 8.0},
                {"rule": "cpu-features", "severity": "info", "estimated_speedup": 1.0},
            ],
        },
        "g07_small_batch.1": {"returncode": 0, "findings": []},
        "h01_cnn_resident.0": {"returncode": 3, "findings": []},
    }
    rows = {
        line.split(" | ")[0].strip("| "): line for line in gpu_zoo.table(gains, runs).splitlines()
    }
    assert (
        "41.50x" in rows["g07_small_batch"] and "gpu-idle critical x8.00" in rows["g07_small_batch"]
    )
    assert "cpu-features" not in rows["g07_small_batch"]  # info is not loud
    assert rows["g07_small_batch"].endswith("| none |")  # the twin: clean
    assert "OOM" in rows["g03_pageable_copies"] and "not run" in rows["g03_pageable_copies"]
    assert "exit 3" in rows["h01_cnn_resident"]


def test_the_c_parts_it_builds_are_hatch_builds(gpu_zoo: ModuleType) -> None:
    parts = gpu_zoo.c_parts()
    assert ("stepdoctor.logs._gcscan", "src/stepdoctor/logs/_gcscan.c") in parts
    assert len(parts) == len({m for m, _ in parts}) >= 6
    root = Path(__file__).parents[2]
    assert all((root / source).is_file() for _, source in parts)


def test_each_run_has_its_step_scale(gpu_zoo: ModuleType) -> None:
    assert set(gpu_zoo.RUN_SCALE) == set(gpu_zoo.FAULTS) | set(gpu_zoo.HEALTHY)
    for script, scales in gpu_zoo.RUN_SCALE.items():
        assert len(scales) == (2 if script in gpu_zoo.FAULTS else 1), script
        assert all(isinstance(k, int) and k >= 1 for k in scales), script


@needs_torch
def test_gains_are_measured_in_a_process_of_their_own(gpu_zoo: ModuleType, tmp_path: Path) -> None:
    # The runner itself never holds the GPU: a CUDA context left in it would be "another
    # process on the GPU" beside every job it then watches.
    result = gpu_zoo.gains(["g07_small_batch.py", "g99_missing.py"], 1, tmp_path)
    g07 = result["g07_small_batch.py"]
    assert len(g07["faulty_samples_per_s"]) == len(g07["fixed_samples_per_s"]) == 1
    assert g07["gain"] > 0
    assert "g99_missing" in result["g99_missing.py"]["error"]  # its failure, in words
    assert (tmp_path / "gains.json").exists()


def test_the_scores_count_causes_on_top_clean_twins_and_close_claims(gpu_zoo: ModuleType) -> None:
    gains = {"g07_small_batch.py": {"gain": 100.0}, "g05_fp32_matmul.py": {"gain": 9.0}}
    loud = {"severity": "critical", "estimated_speedup": 120.0}
    runs = {
        "g07_small_batch.0": {"findings": [{"rule": "small-batch", **loud}]},
        "g07_small_batch.1": {"findings": [{"rule": "small-batch", "severity": "info"}]},
        "g05_fp32_matmul.0": {"findings": [{"rule": "input-bound", **loud}]},
        "g05_fp32_matmul.1": {"findings": [{"rule": "tensor-core-precision", **loud}]},
        "h01_cnn_resident.0": {"summary": {}, "findings": []},
    }
    lines = gpu_zoo.scores(gains, runs)
    assert lines[0].startswith("- planted cause on top: 1 of ") and "g07_small_batch" in lines[0]
    assert lines[1] == "- fixed twins with no warning or critical finding: 1 of 2"
    assert lines[2] == "- healthy controls with no warning or critical finding: 1 of 1"
    assert lines[3].startswith("- claims within 1.3x of the true gain: 1 of 1")  # 120 vs 100
