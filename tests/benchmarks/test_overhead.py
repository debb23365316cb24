"""The overhead benchmark's statistics (benchmarks/overhead.py): its interval and verdict."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path
from types import ModuleType

import pytest

_PATH = Path(__file__).parents[2] / "benchmarks" / "overhead.py"


def overhead_module() -> ModuleType:
    """benchmarks/overhead.py, imported once (it is not a package's module)."""
    name = "overhead_benchmark"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, _PATH)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture
def overhead() -> ModuleType:
    return overhead_module()


def _rounds(n: int, overhead: float, noise: float, seed: int) -> list[tuple[float, float]]:
    """``n`` pairs of rounds (watched, plain) of 50 steps of ~1 ms, the watched ones
    ``overhead`` slower, each round's steps shifted by the machine's noise of that moment."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        rounds = []
        for factor in (1.0 + overhead, 1.0):
            load = 1.0 + abs(rng.gauss(0.0, noise))  # other processes only ever slow steps
            rounds.append([round(1e6 * factor * load * rng.uniform(0.98, 1.02)) for _ in range(50)])
        pairs.append((rounds[0], rounds[1]))
    return overhead_module().round_means(pairs)


def test_the_interval_holds_the_true_overhead_and_narrows_with_more_rounds(
    overhead: ModuleType,
) -> None:
    few = _rounds(12, 0.005, 0.02, seed=1)
    many = _rounds(300, 0.005, 0.02, seed=1)
    for statistic in (overhead.median_round_ratio, overhead.total_ratio):
        low, high = overhead.interval(few, statistic)
        m_low, m_high = overhead.interval(many, statistic)
        assert low <= statistic(few) <= high
        assert m_low < 1.005 < m_high
        assert m_high - m_low < (high - low) / 2
    # the same rounds, the same interval (a seeded bootstrap)
    assert overhead.interval(few, overhead.total_ratio) == overhead.interval(
        few, overhead.total_ratio
    )


def test_the_statistics_of_rounds_of_known_times(overhead: ModuleType) -> None:
    pairs = overhead.round_means(
        [([110, 110], [100, 100]), ([200, 200], [100, 100]), ([90, 90], [100, 100])]
    )
    assert overhead.median_round_ratio(pairs) == pytest.approx(1.1)
    assert overhead.total_ratio(pairs) == pytest.approx(800 / 600)


def test_the_verdict_says_whether_noise_could_account_for_the_figure(
    overhead: ModuleType,
) -> None:
    assert overhead.verdict(1.004, 1.009, 0.01) == "OK"
    assert overhead.verdict(1.008, 1.015, 0.01).startswith("OK within noise")
    assert "+1.5%" in overhead.verdict(1.008, 1.015, 0.01)
    assert overhead.verdict(1.012, 1.02, 0.01) == "OVER TARGET"
