"""How well a cost model ranks measured schedules: Spearman's ρ, whether the measured best is in the
model's top 10, and the median measured / predicted ratio.

One definition for the tuner's report (``search.tune``: the study's measured trials) and for the fit
script (``benchmarks/costmodel_rank.py``), so both print the same numbers for the same trials.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass


def ranks(values: Sequence[float]) -> list[float]:
    """Ranks 1..n, ties sharing the average rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for t in range(i, j + 1):
            out[order[t]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's ρ: Pearson correlation of the ranks (None with fewer than 3 pairs or no spread)."""
    if len(x) != len(y) or len(x) < 3:
        return None
    rx, ry = ranks(x), ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    vx = math.sqrt(sum((a - mx) ** 2 for a in rx))
    vy = math.sqrt(sum((b - my) ** 2 for b in ry))
    if vx == 0 or vy == 0:
        return None
    return cov / (vx * vy)


def model_top(predicted: Sequence[float], numbers: Sequence[int], k: int = 10) -> list[int]:
    """The trial numbers of the ``k`` smallest predictions (ties broken by trial number, as the tuner)."""
    return [n for _, n in sorted(zip(predicted, numbers, strict=True))[:k]]


@dataclass(frozen=True)
class RankQuality:
    """The ranking figures of one study.

    Attributes:
        n: measured trials compared.
        spearman: Spearman's ρ between predicted and measured times (None: < 3 trials).
        best: the trial counted as the measured best (the tuner's final winner, else the fastest).
        best_in_top10: whether ``best`` is among the model's 10 smallest predictions.
        best_model_rank: 1-based position of ``best`` in the model's order.
        median_ratio: median of measured / predicted.
        top10: the model's top 10 trial numbers.
    """

    n: int
    spearman: float | None
    best: int
    best_in_top10: bool
    best_model_rank: int
    median_ratio: float
    top10: tuple[int, ...]

    def to_dict(self) -> dict:
        return asdict(self)


def rank_quality(predicted: Sequence[float], measured: Sequence[float], numbers: Sequence[int],
                 best: int | None = None) -> RankQuality:
    """Spearman's ρ, measured best in the model's top 10, median measured / predicted.

    Args:
        predicted: predicted seconds per trial.
        measured: measured seconds per trial (same order).
        numbers: trial numbers (same order; distinct).
        best: the measured best trial (the tuner: its final re-measurement's winner); None: the trial
            with the smallest ``measured`` (lowest number on ties).

    Raises:
        ValueError: the sequences differ in length, are empty, or ``best`` is not among ``numbers``.
    """
    if not (len(predicted) == len(measured) == len(numbers)) or not numbers:
        raise ValueError(f"rank_quality: predicted ({len(predicted)}), measured ({len(measured)}) and numbers "
                         f"({len(numbers)}) must be equally long and non-empty")
    if best is None:
        best = min(zip(measured, numbers, strict=True))[1]
    if best not in numbers:
        raise ValueError(f"rank_quality: best={best} is not one of the {len(numbers)} trials")
    order = model_top(predicted, numbers, len(numbers))
    top10 = tuple(order[:10])
    ratio = statistics.median(m / p for m, p in zip(measured, predicted, strict=True))
    return RankQuality(len(numbers), spearman(predicted, measured), best, best in top10,
                       order.index(best) + 1, ratio, top10)
