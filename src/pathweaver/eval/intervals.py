"""95% intervals for the eval figures.

all-evidence@k is a proportion (each question scores 0 or 1), so its interval is the Wilson score interval. recall@k
averages fractions (a two-gold question scores 0, 0.5 or 1), which no binomial formula covers, so its interval is a
percentile bootstrap over questions: ``BOOTSTRAP_RESAMPLES`` resamples with replacement, seeded with
``BOOTSTRAP_SEED`` so the same rankings always print the same interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from pathweaver.config import ConfigError

Z_95 = 1.959963984540054  # the standard normal's 97.5th percentile
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
WILSON = "wilson"
BOOTSTRAP = f"bootstrap-percentile({BOOTSTRAP_RESAMPLES}, seed {BOOTSTRAP_SEED})"


def wilson(successes: float, n: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval of ``successes`` out of ``n`` (95% by default)."""
    if n < 1:
        raise ConfigError("an interval needs at least one question")
    if not 0 <= successes <= n:
        raise ConfigError(f"successes must be in [0, {n}], got {successes}")
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def bootstrap_mean(values: Sequence[float], resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED,
                   level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values`` (resampled with replacement, fixed seed)."""
    if not values:
        raise ConfigError("an interval needs at least one question")
    arr = np.asarray(values, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = arr[rng.integers(0, len(arr), size=(resamples, len(arr)))].mean(axis=1)
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(means, [tail, 100 - tail])
    return float(lo), float(hi)


def proportion_ci(scores: Sequence[float]) -> list[float]:
    """Wilson interval of 0/1 scores, as a JSON-friendly ``[low, high]``."""
    return [round(x, 4) for x in wilson(sum(scores), len(scores))]


def mean_ci(scores: Sequence[float]) -> list[float]:
    """Bootstrap interval of fractional scores, as a JSON-friendly ``[low, high]``."""
    return [round(x, 4) for x in bootstrap_mean(scores)]
