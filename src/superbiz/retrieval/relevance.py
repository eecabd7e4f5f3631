"""Relevance normalisation: backend scores → exact cosine → level + completeness hint.

Pure functions, no I/O. The model never sees a raw score: it sees a
``RelevanceLevel`` and a hint; raw scores and similarities go to the record.

For unit vectors ``u, v``: ``|u − v|² = 2 − 2·cos(u, v)``, so ``cos = 1 − d²/2``.
Milvus' ``L2`` metric returns the *squared* distance ``s``, hence ``cos = 1 − s/2``;
``IP`` and ``COSINE`` return the cosine itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from superbiz._messages import localized
from superbiz._text import Language
from superbiz.config import EvidenceLevelSettings

Metric = Literal["L2", "L2_SQUARED", "IP", "COSINE"]


class RelevanceLevel(StrEnum):
    """How good a lookup result is, as the model is told."""

    PRECISE = "PRECISE"
    HIGHLY_RELEVANT = "HIGHLY_RELEVANT"
    REFERENCE = "REFERENCE"
    DEDUPED = "DEDUPED"


@dataclass(frozen=True, slots=True)
class Thresholds:
    """``highly_relevant`` ≥ ``reference``; both are cosines. ``highly_relevant_lead``: how
    far the top document's cosine must also lead the next documents' for HIGHLY_RELEVANT
    (0 in the shipped numbers; measured per KB, ``superbiz.retrieval.calibration``)."""

    highly_relevant: float
    reference: float
    highly_relevant_lead: float = 0.0

    def __post_init__(self) -> None:
        if self.reference > self.highly_relevant:
            raise ValueError(
                f"reference threshold {self.reference} exceeds "
                f"highly-relevant threshold {self.highly_relevant}"
            )


# Measured per embedder with ``superbiz calibrate`` (see README, "Thresholds").
DEFAULT_THRESHOLDS: dict[str, Thresholds] = {
    "use-multilingual-v3": Thresholds(highly_relevant=0.6, reference=0.3),
    "bge-m3": Thresholds(highly_relevant=0.75, reference=0.5),  # docs/design.md §2.2
}
FALLBACK_THRESHOLDS = Thresholds(highly_relevant=0.75, reference=0.5)


#: the largest Euclidean distance between two unit vectors (opposite ones)
MAX_L2_DISTANCE = 2.0


def similarity_from_score(score: float, metric: Metric) -> float:
    """Exact cosine similarity of unit vectors from what the vector backend returned.

    ``L2`` is Milvus' squared Euclidean distance, ``L2_SQUARED`` an alias of it;
    distances are clamped to ``MAX_L2_DISTANCE``.

    >>> similarity_from_score(0.0, "L2"), similarity_from_score(2.0, "L2")
    (1.0, 0.0)
    >>> similarity_from_score(4.0, "L2"), similarity_from_score(0.42, "IP")
    (-1.0, 0.42)
    """
    if metric in ("IP", "COSINE"):
        return max(-1.0, min(1.0, score))
    squared = min(max(score, 0.0), MAX_L2_DISTANCE**2)
    return max(-1.0, min(1.0, 1.0 - squared / 2.0))


def similarity_from_euclidean(distance: float) -> float:
    """Cosine from a true (not squared) Euclidean distance ``d``: ``1 − d²/2``.

    >>> abs(similarity_from_euclidean(math.sqrt(2))) < 1e-9  # orthogonal vectors
    True
    """
    return similarity_from_score(min(max(distance, 0.0), MAX_L2_DISTANCE) ** 2, "L2")


def completeness_hint(level: RelevanceLevel | None, language: Language) -> str:
    """The completeness hint (docs/design.md §2.3) for ``level`` in the query's language
    (``None`` = no result)."""
    if level is None:
        return localized("relevance.no_result", language)
    return localized(f"relevance.hint.{level.lower()}", language)


def relevance_level(
    l0_match_count: int,
    l1_top_similarity: float | None,
    thresholds: Thresholds,
    lead: float | None = None,
) -> RelevanceLevel | None:
    """The level table of docs/design.md §2.2; ``None`` means "no result". ``lead``: how
    far the top document's cosine leads the next documents' (None: there are none).

    ==========  ==================================  ===============
    L0 matches  L1 top similarity                   level
    ==========  ==================================  ===============
    1           any                                 PRECISE
    0 or > 1    ≥ highly_relevant, lead ≥ its lead  HIGHLY_RELEVANT
    0 or > 1    [reference, highly) or less lead    REFERENCE
    0 or > 1    < reference or none                 None
    ==========  ==================================  ===============

    >>> t = Thresholds(0.75, 0.5)
    >>> relevance_level(1, None, t), relevance_level(3, 0.8, t), relevance_level(0, 0.6, t)
    (<RelevanceLevel.PRECISE: 'PRECISE'>, <RelevanceLevel.HIGHLY_RELEVANT: 'HIGHLY_RELEVANT'>, \
<RelevanceLevel.REFERENCE: 'REFERENCE'>)
    >>> relevance_level(0, 0.8, Thresholds(0.75, 0.5, highly_relevant_lead=0.1), lead=0.05)
    <RelevanceLevel.REFERENCE: 'REFERENCE'>
    """
    if l0_match_count < 0:
        raise ValueError("l0_match_count cannot be negative")
    if l0_match_count == 1:
        return RelevanceLevel.PRECISE
    if l1_top_similarity is None or math.isnan(l1_top_similarity):
        return None
    leads = lead is None or lead >= thresholds.highly_relevant_lead
    if l1_top_similarity >= thresholds.highly_relevant and leads:
        return RelevanceLevel.HIGHLY_RELEVANT
    if l1_top_similarity >= thresholds.reference:
        return RelevanceLevel.REFERENCE
    return None


def with_answer_evidence(
    level: RelevanceLevel | None, answer_cosine: float | None, reference: float
) -> RelevanceLevel | None:
    """``level``, raised from no result to REFERENCE when the answer model matches the top
    document's opening at ``reference`` or more (``advanced.retrieval.answers.reference``).

    The answer model re-ranks by how well a document *answers* the question, so its top
    document may share few words with it and have a USE cosine under the reference
    threshold: without this, a lookup whose answer the model put first showed nothing.

    >>> with_answer_evidence(None, 0.9, 0.85), with_answer_evidence(None, 0.8, 0.85)
    (<RelevanceLevel.REFERENCE: 'REFERENCE'>, None)
    >>> with_answer_evidence(RelevanceLevel.HIGHLY_RELEVANT, 0.5, 0.85)
    <RelevanceLevel.HIGHLY_RELEVANT: 'HIGHLY_RELEVANT'>
    """
    if level is None and answer_cosine is not None and answer_cosine >= reference:
        return RelevanceLevel.REFERENCE
    return level


@dataclass(frozen=True, slots=True)
class PrimaryEvidence:
    """What a lookup knows about its primary document besides its cosine: how far it leads
    the next documents, and what the answer model says of it."""

    similarity: float  # the primary's cosine with the query
    similarity_lead: float  # over the best of the next four documents
    answer: float  # the answer model's cosine with the primary's opening
    answer_lead: float  # over the best other candidate's
    answer_best: bool  # the primary is the model's best opening among the candidates


class EvidenceLevels(EvidenceLevelSettings):
    """``advanced.retrieval.levels: evidence``: a logistic model of "the primary answers the query"
    over ``PrimaryEvidence``; at ``threshold`` or more the result is HIGHLY_RELEVANT.

    The cosine rule (docs/design.md §2.2) sees one number; with the answer model a primary
    can be sure (it leads both rankings) at a modest cosine, or doubtful at a high one. Below the
    threshold the cosine rule stands, except that its HIGHLY_RELEVANT becomes REFERENCE.
    Its coefficients are the settings' (``advanced.retrieval.evidence-levels``).
    """

    def probability(self, evidence: PrimaryEvidence) -> float:
        z = (
            self.bias
            + self.similarity * evidence.similarity
            + self.similarity_lead * evidence.similarity_lead
            + self.answer * evidence.answer
            + self.answer_lead * evidence.answer_lead
            + self.answer_best * evidence.answer_best
        )
        return 1.0 / (1.0 + math.exp(-z))

    def level(
        self, cosine_level: RelevanceLevel | None, evidence: PrimaryEvidence
    ) -> RelevanceLevel | None:
        """The level from all the evidence; PRECISE (one exact match) is left alone.

        >>> sure = PrimaryEvidence(0.45, 0.15, 0.93, 0.04, True)
        >>> doubtful = PrimaryEvidence(0.62, -0.01, 0.90, -0.01, False)
        >>> EVIDENCE_LEVELS.level(RelevanceLevel.REFERENCE, sure)
        <RelevanceLevel.HIGHLY_RELEVANT: 'HIGHLY_RELEVANT'>
        >>> EVIDENCE_LEVELS.level(RelevanceLevel.HIGHLY_RELEVANT, doubtful)
        <RelevanceLevel.REFERENCE: 'REFERENCE'>
        """
        if cosine_level is RelevanceLevel.PRECISE:
            return cosine_level
        if self.probability(evidence) >= self.threshold:
            return RelevanceLevel.HIGHLY_RELEVANT
        if cosine_level is RelevanceLevel.HIGHLY_RELEVANT:
            return RelevanceLevel.REFERENCE
        return cosine_level


#: Fitted on dev's 203 lookups that were not PRECISE (USE, multilingual-e5-small; L2 0.1);
#: the threshold is the median over ten 10-fold cross-validations of the lowest probability
#: at which out-of-fold precision reaches 0.95 (0.886–0.909): what ``superbiz eval levels``
#: prints for dev. README, "Levels from all the evidence".
EVIDENCE_LEVELS = EvidenceLevels(
    bias=-1.267,
    similarity=1.913,
    similarity_lead=4.947,
    answer=1.491,
    answer_lead=1.724,
    answer_best=0.983,
    threshold=0.902,
)
