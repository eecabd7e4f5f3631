"""``superbiz eval levels``: fit ``advanced.retrieval.levels: evidence`` on a labelled dataset.

Each query runs through retrieval with the answer model and the cosine levels
(docs/design.md §2.2); a lookup that is not PRECISE is one sample: its primary's
``PrimaryEvidence`` and whether the primary is gold. A logistic model (L2-regularised,
Newton's method) is fitted on all the samples; the threshold is the median, over
``repeats`` shuffles, of the lowest probability at which ``folds``-fold
cross-validation's out-of-fold precision reaches ``target`` with at least ``support``
lookups above it. On dev this gives the shipped ``EVIDENCE_LEVELS``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from statistics import median
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from superbiz.config import Settings
from superbiz.evaluation.retrieval import load_queries, prepare_dataset
from superbiz.exceptions import SuperbizError
from superbiz.retrieval.pipeline import primary_evidence
from superbiz.retrieval.relevance import EvidenceLevels, PrimaryEvidence, RelevanceLevel

#: fewer lookups than this cannot tell a threshold from noise
MIN_SAMPLES = 40
TARGET_PRECISION = 0.95
#: lookups that must lie above a threshold for its precision to count
SUPPORT = 20

Sample = tuple[PrimaryEvidence, bool]
#: ``EvidenceLevels``' weights, in the order of ``feature_row``
COEFFICIENTS = ("bias", "similarity", "similarity_lead", "answer", "answer_lead", "answer_best")


def feature_row(evidence: PrimaryEvidence) -> list[float]:
    """The model's inputs, in the order of ``COEFFICIENTS`` (1.0 for the bias)."""
    return [
        1.0,
        evidence.similarity,
        evidence.similarity_lead,
        evidence.answer,
        evidence.answer_lead,
        float(evidence.answer_best),
    ]


def _sigmoid(z: np.ndarray) -> np.ndarray:
    p: np.ndarray = 1.0 / (1.0 + np.exp(-z))
    return p


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 0.1, steps: int = 60) -> np.ndarray:
    """Weights of an L2-regularised logistic regression of ``y`` (0/1) on the rows of ``x``.

    >>> x = np.array([[1, 0.1], [1, 0.9], [1, 0.2], [1, 0.8]])
    >>> w = fit_logistic(x, np.array([0.0, 1.0, 0.0, 1.0]))
    >>> bool(w[1] > 0)
    True
    """
    weights = np.zeros(x.shape[1])
    for _ in range(steps):
        p = _sigmoid(x @ weights)
        gradient = x.T @ (p - y) + l2 * weights
        hessian = (x.T * (p * (1.0 - p))) @ x + l2 * np.eye(len(weights))
        weights -= np.linalg.solve(hessian, gradient)
    return weights


def lowest_threshold(
    probabilities: np.ndarray, gold: np.ndarray, target: float, support: int
) -> float | None:
    """The lowest probability (to 0.001) with at least ``support`` samples at or above it
    whose share of gold reaches ``target``; None when there is none.

    >>> lowest_threshold(np.array([0.2, 0.6, 0.7, 0.9]), np.array([0, 0, 1, 1.0]), 0.95, 2)
    0.7
    """
    for threshold in sorted({round(float(p), 3) for p in probabilities}):
        above = probabilities >= threshold
        if above.sum() >= support and gold[above].mean() >= target:
            return threshold
    return None


def out_of_fold(x: np.ndarray, y: np.ndarray, folds: int, seed: int, l2: float) -> np.ndarray:
    """Each sample's probability from a model fitted without its fold."""
    order = list(range(len(y)))
    random.Random(seed).shuffle(order)
    probabilities = np.zeros(len(y))
    for fold in range(folds):
        held = order[fold::folds]
        kept = sorted(set(order) - set(held))
        weights = fit_logistic(x[kept], y[kept], l2)
        probabilities[held] = _sigmoid(x[held] @ weights)
    return probabilities


def fit_evidence_levels(
    samples: Sequence[Sample],
    *,
    l2: float = 0.1,
    target: float = TARGET_PRECISION,
    support: int = SUPPORT,
    folds: int = 10,
    repeats: int = 10,
) -> tuple[EvidenceLevels, list[float]]:
    """The fitted model and the cross-validated thresholds its own is the median of."""
    if len(samples) < MIN_SAMPLES:
        raise SuperbizError(
            f"{len(samples)} lookups that are not PRECISE: at least {MIN_SAMPLES} are needed "
            "to fit the level model (add queries whose answer is not named by a title)"
        )
    x = np.array([feature_row(evidence) for evidence, _ in samples])
    y = np.array([float(gold) for _, gold in samples])
    found = [
        lowest_threshold(out_of_fold(x, y, min(folds, len(y)), seed, l2), y, target, support)
        for seed in range(repeats)
    ]
    thresholds = [t for t in found if t is not None]
    if not thresholds:
        raise SuperbizError(
            f"no probability reaches a precision of {target} on {support} or more lookups "
            "held out: the level model cannot tell right primaries from wrong ones here"
        )
    weights = fit_logistic(x, y, l2)
    model = EvidenceLevels(
        **{name: round(float(w), 3) for name, w in zip(COEFFICIENTS, weights, strict=True)},
        threshold=round(median(thresholds), 3),
    )
    return model, thresholds


def collect_samples(dataset_dir: Path, settings: Settings) -> list[tuple[Sample, bool]]:
    """Each non-PRECISE lookup's evidence, whether its primary is gold, and whether the
    cosine rule (docs/design.md §2.2) called it HIGHLY_RELEVANT."""
    if settings.retrieval.answers.model == "none":
        raise SuperbizError(
            "eval levels reads the answer model's evidence: set retrieval.answers.model (e5)"
        )
    advanced = settings.advanced
    seed_rule = advanced.model_copy(
        update={"retrieval": advanced.retrieval.model_copy(update={"levels": "cosine"})}
    )
    kb = prepare_dataset(dataset_dir, settings.model_copy(update={"advanced": seed_rule}))
    try:
        samples = []
        for query in load_queries(dataset_dir):
            found = kb.retrieve(query.query)
            evidence = primary_evidence(found.ranked) if found.ranked else None
            if evidence is None or found.level is RelevanceLevel.PRECISE:
                continue
            gold = found.ranked[0].doc_path in query.gold
            samples.append(((evidence, gold), found.level is RelevanceLevel.HIGHLY_RELEVANT))
        return samples
    finally:
        kb.close()


def calibrate_levels(dataset_dir: Path, settings: Settings) -> dict[str, Any]:
    """Fit the level model on ``dataset_dir`` and compare it with the cosine rule there."""
    collected = collect_samples(dataset_dir, settings)
    samples = [sample for sample, _ in collected]
    model, thresholds = fit_evidence_levels(samples, support=SUPPORT)
    fitted = [model.probability(evidence) >= model.threshold for evidence, _ in samples]
    seed = [highly for _, highly in collected]
    gold = [is_gold for _, is_gold in samples]
    return {
        "dataset": str(dataset_dir),
        "lookups": len(samples),
        "gold_primaries": sum(gold),
        "model": model.model_dump(),
        "cross_validated_thresholds": thresholds,
        "highly_relevant": {
            "cosine": _precision(seed, gold),
            "evidence": _precision(fitted, gold),
        },
    }


def _precision(chosen: list[bool], gold: list[bool]) -> dict[str, float | int | None]:
    count = sum(chosen)
    correct = sum(c and g for c, g in zip(chosen, gold, strict=True))
    return {
        "count": count,
        "correct": correct,
        "precision": round(correct / count, 4) if count else None,
    }


def render_levels(report: dict[str, Any], console: Console) -> None:
    table = Table(title=f"HIGHLY_RELEVANT on {report['lookups']} lookups that are not PRECISE")
    for column in ("levels", "count", "correct", "precision"):
        table.add_column(column, justify="left" if column == "levels" else "right")
    for name, row in report["highly_relevant"].items():
        precision = "-" if row["precision"] is None else f"{row['precision']:.3f}"
        table.add_row(name, str(row["count"]), str(row["correct"]), precision)
    console.print(table)
    low, high = min(report["cross_validated_thresholds"]), max(report["cross_validated_thresholds"])
    console.print(
        f"{report['gold_primaries']} gold primaries; thresholds cross-validated: {low}–{high} "
        "(the median is used; 'evidence' above is in-sample)"
    )
    console.print("settings (superbiz.yaml):")
    lines = ["advanced:", "  retrieval:", "    levels: evidence", "    evidence-levels:"]
    lines += [f"      {key.replace('_', '-')}: {value}" for key, value in report["model"].items()]
    console.print("\n".join(lines), markup=False, highlight=False)
