"""Trends of readings over time, for the rules that judge a rise (memory-growth): the
least-squares line through them with its standard error, and moving averages."""

from __future__ import annotations

import dataclasses
import itertools
import statistics
from collections.abc import Sequence

__all__ = ["Trend", "moving_average", "trend_rise"]


def trend_rise(points: Sequence[tuple[int, int]]) -> float:
    """The rise of the least-squares line through ``points`` from the first to the last."""
    t0 = points[0][0]
    slope, _ = statistics.linear_regression(
        [(t - t0) / 1e9 for t, _ in points], [float(v) for _, v in points]
    )
    return slope * (points[-1][0] - t0) / 1e9


def moving_average(values: Sequence[float], window: int) -> list[float]:
    """Means of every ``window`` consecutive values, from a running sum (linear: an hour at
    10 Hz has 36,000 samples and a window of 3,600). The values are byte counts, whole numbers
    far below 2**53, so the sums are exact, as a fresh sum of each window is."""
    if len(values) < window:
        return []
    total = sum(values[:window])
    out = [total / window]
    for i in range(window, len(values)):
        total += values[i] - values[i - window]
        out.append(total / window)
    return out


@dataclasses.dataclass(frozen=True, slots=True)
class Trend:
    """The least-squares line through readings: where it starts, how much it rises over
    them, its slope in standard errors, how much the line through their second half rises
    over that half (a rise that stopped: ~0), and the readings' swing about it."""

    start: float
    rise: float
    t: float
    late_rise: float
    swing: float = 0.0
    """The largest change between successive readings, less the trend's over that time."""
    rise_error: float = 0.0
    """The standard error of ``rise`` (the slope's, over the readings' span)."""

    def rise_bound(self, errors: float) -> float:
        """The most the line can have risen by, ``errors`` standard errors above its rise."""
        return self.rise + errors * self.rise_error

    def beyond_swing(self, margin: float) -> bool:
        """Whether the line rose past what the readings' swing can fake: ``margin`` times
        the swing."""
        return self.rise >= margin * self.swing

    @classmethod
    def of(cls, points: Sequence[tuple[int, int]]) -> Trend:
        """The trend of ``points`` (time in ns, value)."""
        t0 = points[0][0]
        xs = [(t - t0) / 1e9 for t, _ in points]
        ys = [float(v) for _, v in points]
        slope, intercept = statistics.linear_regression(xs, ys)
        n = len(xs)
        spread = sum((x - statistics.fmean(xs)) ** 2 for x in xs)
        residual = sum((y - (intercept + slope * x)) ** 2 for x, y in zip(xs, ys, strict=True))
        error = (residual / (n - 2) / spread) ** 0.5 if n > 2 and spread > 0 else 0.0
        t = slope / error if error > 0 else (float("inf") if slope > 0 else 0.0)
        half = points[len(points) // 2 :]
        late = trend_rise(half) if len(half) >= 2 and half[-1][0] > half[0][0] else 0.0
        swing = max(
            (
                abs(y1 - y0 - slope * (x1 - x0))
                for (x0, y0), (x1, y1) in itertools.pairwise(zip(xs, ys, strict=True))
            ),
            default=0.0,
        )
        return cls(
            start=intercept,
            rise=slope * xs[-1],
            t=t,
            late_rise=late,
            swing=swing,
            rise_error=error * xs[-1],
        )
