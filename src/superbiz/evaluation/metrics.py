"""Ranking metrics and summaries (pure)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def recall_at(ranked: Sequence[str], gold: Sequence[str], k: int) -> float:
    """Share of gold documents found in the first ``k``.

    >>> recall_at(["a", "b", "c"], ["c", "z"], 3)
    0.5
    """
    if not gold:
        return 0.0
    top = set(ranked[:k])
    return sum(1 for g in gold if g in top) / len(gold)


def gold_rank(ranked: Sequence[str], gold: Sequence[str]) -> int | None:
    """The 1-based rank of the first gold document in ``ranked``; None when there is none.

    >>> gold_rank(["a", "b", "c"], ["c", "b"]), gold_rank(["a"], ["z"])
    (2, None)
    """
    golden = set(gold)
    return next((rank for rank, doc in enumerate(ranked, start=1) if doc in golden), None)


def reciprocal_rank(ranked: Sequence[str], gold: Sequence[str], k: int = 10) -> float:
    """``1 / rank`` of the first gold document within ``k``, else 0.

    >>> reciprocal_rank(["a", "b", "c"], ["b"])
    0.5
    """
    rank = gold_rank(ranked[:k], gold)
    return 0.0 if rank is None else 1.0 / rank


def scored_reciprocal_rank(scores: np.ndarray, gold: np.ndarray, depth: int = 10) -> float:
    """1 / the rank of the first gold row by ``scores`` (the earlier row first among
    equals), 0 beyond ``depth``."""
    order = np.argsort(-scores, kind="stable")
    ranks = np.flatnonzero(gold[order])
    if not len(ranks) or ranks[0] >= depth:
        return 0.0
    return 1.0 / (int(ranks[0]) + 1)


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile, ``q`` in [0, 100].

    >>> percentile([5, 1, 3, 2, 4], 50), percentile([5, 1, 3, 2, 4], 95)
    (3, 5)
    """
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def wilson_interval(hits: int, total: int, z: float = 1.96) -> tuple[float, float] | None:
    """The Wilson score interval of a proportion (95 % with the default ``z``): a level's
    precision over a few dozen lookups is a range, and 0.977 on 44 says less than it reads.
    None without any trial.

    >>> wilson_interval(43, 44)
    (0.8819, 0.996)
    >>> wilson_interval(0, 2), wilson_interval(0, 0)
    ((0.0, 0.6576), None)
    """
    if total <= 0:
        return None
    p = hits / total
    denominator = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denominator
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denominator
    return round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)
