"""A turn's answer selection: the documents in front of the answer, in the order its
lookups ranked them (the session's held documents where those lookups put them), the
first of them reordered by a passage model where the knowledge base has one
(:mod:`superbiz.agents.quote_order`), with their passages read from the knowledge base,
handed to the pure :func:`superbiz.agents.answer_selection.select_answer`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from functools import partial

import numpy as np

from superbiz._text import latin_subject, normalize
from superbiz.access import Reader
from superbiz.agents.answer_selection import (
    AnswerSelection,
    PassageSource,
    StoredPassage,
    select_answer,
)
from superbiz.agents.context import Citation
from superbiz.agents.follow_up import asks_instead, refers_back
from superbiz.agents.quote_order import PASSAGE_CHARS, QUOTE_DEPTH, PassageMatcher, fused_order
from superbiz.governance.lookup import level_rank
from superbiz.governance.results import ToolOutcome

__all__ = ["model_order", "reading_order", "select_for_turn"]


def select_for_turn(
    question: str,
    documents: Sequence[Citation],
    outcomes: Sequence[ToolOutcome],
    passages: PassageSource | None,
    *,
    earlier: Collection[str] = (),
    previous: str | None = None,
    reader: Reader | None = None,
) -> AnswerSelection:
    """What the answer to ``question`` quotes and lists among ``documents`` (this turn's
    and the session's; ``earlier``: the paths of the session's), after the turn's
    ``outcomes``; in a follow-up (``previous``: what it may point back at, ``referent``)
    that points back (``refers_back``), read with that when its own words find nothing,
    or at once where it asks that again of something else (``asks_instead``).
    ``passages``: where the documents' stored
    passages and the question's vector come from (None: the documents' shown text and
    the question's terms alone); ``reader``: whose turn it is."""
    ordered = reading_order(list(documents), outcomes)
    if not ordered:
        return AnswerSelection(unknown=tuple(_unnamed(question, [], passages, reader)))
    details = [o.details for o in outcomes if o.details]
    placed = {p for d in details for p in [*d.held_ahead, *d.shown]}
    context = f"{previous}\n{question}" if previous and refers_back(question) else None
    elliptical = context is not None and asks_instead(question)
    if passages is None:
        stored: Mapping[str, Sequence[StoredPassage]] = {}
        vector = None
    else:
        stored = passages.passages([d.path for d in ordered])
        vector = passages.embed_question(question)
        if isinstance(passages, PassageMatcher):
            ordered = model_order(question, ordered, placed, stored, vector, passages)
    select = partial(
        select_answer,
        question,
        ordered,
        stored,
        vector,
        earlier=frozenset(earlier),
        placed=placed,
        recalled=frozenset(p for d in details for p in [*d.withheld, *d.shown]),
        unknown=_unnamed(
            question, [(d.title, stored.get(d.path, ())) for d in ordered], passages, reader
        ),
    )
    if passages is None:
        return select(context=context, elliptical=elliptical)
    chinese = passages.writes_chinese(reader)
    if context is None or not elliptical:
        selection = select(writes_chinese=chinese)
        if selection.answered or context is None:
            return selection
    wider = passages.embed_question(context)
    return select(
        context=context, context_vector=wider, elliptical=elliptical, writes_chinese=chinese
    )


def _unnamed(
    question: str,
    shown: Sequence[tuple[str, Sequence[StoredPassage]]],
    passages: PassageSource | None,
    reader: Reader | None,
) -> list[str]:
    """What a Chinese question asks about (``latin_subject``) when nothing names it: no
    shown document (``shown``: each one's title and passages), even inside a longer word
    ("Postgres" in "PostgreSQL"), and no passage the reader may read
    (``PassageSource.unknown_names``). Such a question is not answered from pages that
    share its other words (``select_answer``'s ``unknown``)."""
    subject = latin_subject(question)
    if subject is None or passages is None:
        return []
    for title, own in shown:
        if any(subject in normalize(text) for text in [title, *(p.text for p in own)]):
            return []
    return passages.unknown_names([subject], reader)


def reading_order(documents: list[Citation], outcomes: Sequence[ToolOutcome]) -> list[Citation]:
    """The documents in the order the answer selection reads them: the plan's lookups
    first, the one with the better level first (the user's words and a planner's
    sub-question are two tries at the same question: the live run's "Postgres 从库延迟…"
    found the replication-lag runbook HIGHLY_RELEVANT only in the planner's words), then
    the model's lookups as they came, then documents of earlier turns. A document of
    an earlier turn that a lookup ranked above what it showed (``held_ahead``) is read
    where that lookup ranked it: right before what it showed, as a fresh session's
    lookup would have shown it.

    On the benchmarks (one planned lookup a question) this is the lookups' order; ranking
    every lookup by its level instead put a supplement's PRECISE primary first and lost
    4 + 3 gold first documents on dev + dev-answer-only."""
    planned = sorted(
        (o for o in outcomes if o.origin == "plan"),
        key=lambda o: -level_rank(o.level),
    )
    order: dict[str, int] = {}
    for outcome in [*planned, *(o for o in outcomes if o.origin != "plan")]:
        ahead = outcome.details.held_ahead if outcome.details else []
        for path in [*ahead, *outcome.shown]:
            order.setdefault(path, len(order))
    return sorted(documents, key=lambda d: order.get(d.path, len(order)))


def model_order(
    question: str,
    ordered: list[Citation],
    ranked: Collection[str],
    stored: Mapping[str, Sequence[StoredPassage]],
    vector: np.ndarray,
    matcher: PassageMatcher,
) -> list[Citation]:
    """``ordered`` with its first documents that the turn's lookups ranked (``ranked``: at
    most ``QUOTE_DEPTH``) in ``fused_order`` of the passage model's match of ``question``
    with each one's best passage (its stored chunk nearest the question's ``vector``);
    unchanged with fewer than two of them or no model (``match_passages`` gives None)."""
    head = 0
    while head < min(len(ordered), QUOTE_DEPTH) and ordered[head].path in ranked:
        head += 1
    if head < 2:
        return ordered
    texts = [best_passage(doc, stored.get(doc.path, ()), vector) for doc in ordered[:head]]
    cosines = matcher.match_passages(question, texts)
    if cosines is None:
        return ordered
    return [ordered[i] for i in fused_order(cosines)] + ordered[head:]


def best_passage(doc: Citation, chunks: Sequence[StoredPassage], vector: np.ndarray) -> str:
    """The document's title and its stored chunk nearest ``vector`` (the content it was
    shown with when no chunk has a vector), cut at ``PASSAGE_CHARS``."""
    scored = [(float(np.dot(vector, c.vector)), c.text) for c in chunks if c.vector is not None]
    if scored:
        return f"{doc.title}\n{max(scored)[1]}"[:PASSAGE_CHARS]
    return f"{doc.title}\n{doc.content}"[:PASSAGE_CHARS]
