"""Which of a turn's documents the answer reads first: the lookups' order, fused with a
passage model's match of the question with each document's best passage.

The answer quotes the first document, in the order the lookups ranked them, whose best
passage answers (``answer_selection``), so the first quote is only as often right as the
lookups' first document. They rank by USE cosines, BM25 and title words, which a
question that does not repeat its page's words ("answer-only") defeats a third of the
time. multilingual-e5-small, trained on question–passage pairs, matches such a question
with the passage that answers it better; fused with the lookups' order rather than put in
its place, it moves a document up only when the two disagree by more than one place.

Written down before it was measured (README, "Answers"): the first ``QUOTE_DEPTH``
documents of the lookups' order, each one's best passage by the embedder's cosine; the
weight chosen on one development pair among 0, 0.25, 0.5, 0.75 and 1 and checked on the
other, in both directions; both chose 0.5 and both held-out pairs gained.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

__all__ = ["MODEL_WEIGHT", "PASSAGE_CHARS", "QUOTE_DEPTH", "PassageMatcher", "fused_order"]

#: how many of the lookups' first documents the passage model may reorder
QUOTE_DEPTH = 5
#: each passage the model reads: the document's title and its best chunk, cut here
PASSAGE_CHARS = 1500
#: the passage model's share of each document's fused place (see the module docstring)
MODEL_WEIGHT = 0.5


def fused_order(cosines: Sequence[float], weight: float = MODEL_WEIGHT) -> list[int]:
    """The documents' positions in the lookups' order, sorted by ``(1 − weight) / (1 +
    place) + weight / (1 + place by cosines)``; a tie keeps the lookups' order, so a
    model that only swaps two neighbours changes nothing.

    >>> fused_order([0.70, 0.90, 0.80])  # the model puts the lookups' first last
    [1, 0, 2]
    >>> fused_order([0.80, 0.90, 0.70])  # neighbours swapped: a tie, the lookups' order
    [0, 1, 2]
    >>> fused_order([0.70, 0.90, 0.80], weight=0.0)
    [0, 1, 2]
    """
    by_model = sorted(range(len(cosines)), key=lambda i: -cosines[i])
    model_place = {position: place for place, position in enumerate(by_model)}
    return sorted(
        range(len(cosines)),
        key=lambda i: (-((1 - weight) / (1 + i) + weight / (1 + model_place[i])), i),
    )


@runtime_checkable
class PassageMatcher(Protocol):
    """Where the passage model's match comes from (``KnowledgeBase`` is one)."""

    def match_passages(self, question: str, passages: Sequence[str]) -> list[float] | None:
        """The cosine of ``question`` with each of ``passages``; None without a model."""
        ...
