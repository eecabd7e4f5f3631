"""Fitting ``advanced.retrieval.levels: evidence``: the logistic model, its cross-validated
threshold, and clear errors when a dataset cannot support one."""

from __future__ import annotations

import random

import pytest

from superbiz.evaluation.levels import MIN_SAMPLES, fit_evidence_levels
from superbiz.exceptions import SuperbizError
from superbiz.retrieval.relevance import PrimaryEvidence


def samples(count: int, *, signal: bool, seed: int = 3) -> list[tuple[PrimaryEvidence, bool]]:
    """Lookups whose primary is gold when it leads the answer model's ranking (``signal``),
    or at random."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        lead = rng.uniform(-0.05, 0.08)
        evidence = PrimaryEvidence(
            similarity=rng.uniform(0.2, 0.8),
            similarity_lead=rng.uniform(-0.05, 0.3),
            answer=rng.uniform(0.8, 0.95),
            answer_lead=lead,
            answer_best=lead > 0,
        )
        gold = lead > 0.01 if signal else rng.random() < 0.5
        out.append((evidence, gold))
    return out


def test_the_model_finds_what_tells_right_primaries_from_wrong_ones() -> None:
    data = samples(120, signal=True)
    model, thresholds = fit_evidence_levels(data)
    assert len(thresholds) == 10 and min(thresholds) <= model.threshold <= max(thresholds)
    assert model.answer_lead > 0 and model.answer_best > 0
    chosen = [gold for evidence, gold in data if model.probability(evidence) >= model.threshold]
    positives = sum(gold for _, gold in data)
    # in-sample precision near the cross-validated target, far above the base rate
    assert positives / len(data) < 0.6 and sum(chosen) / len(chosen) >= 0.9
    assert len(chosen) >= positives / 2  # not a handful of sure cases only


def test_too_few_lookups_are_a_clear_error() -> None:
    with pytest.raises(SuperbizError, match=f"at least {MIN_SAMPLES} are needed"):
        fit_evidence_levels(samples(MIN_SAMPLES - 1, signal=True))


def test_evidence_that_tells_nothing_is_a_clear_error() -> None:
    with pytest.raises(SuperbizError, match="cannot tell right primaries from wrong ones"):
        fit_evidence_levels(samples(120, signal=False))
