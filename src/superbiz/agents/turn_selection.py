"""A turn's answer selection: the documents in front of the answer, in the order its
lookups ranked them (the session's held documents where those lookups put them), with
their passages read from the knowledge base, handed to the pure
:func:`superbiz.agents.answer_selection.select_answer`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from functools import partial

from superbiz.access import Reader
from superbiz.agents.answer_selection import AnswerSelection, PassageSource, select_answer
from superbiz.agents.context import Citation
from superbiz.agents.follow_up import refers_back
from superbiz.governance.lookup import level_rank
from superbiz.governance.results import ToolOutcome

__all__ = ["reading_order", "select_for_turn"]


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
    ``outcomes``; in a follow-up (``previous``: the question before it) that points back
    at it (``refers_back``), read with that question when its own words find nothing.
    ``passages``: where the documents' stored
    passages and the question's vector come from (None: the documents' shown text and
    the question's terms alone); ``reader``: whose turn it is."""
    ordered = reading_order(list(documents), outcomes)
    if not ordered:
        return AnswerSelection()
    details = [o.details for o in outcomes if o.details]
    select = partial(
        select_answer,
        question,
        ordered,
        earlier=frozenset(earlier),
        placed={p for d in details for p in [*d.held_ahead, *d.shown]},
        recalled=frozenset(p for d in details for p in [*d.withheld, *d.shown]),
    )
    context = f"{previous}\n{question}" if previous and refers_back(question) else None
    if passages is None:
        return select({}, context=context)
    stored = passages.passages([d.path for d in ordered])
    vector = passages.embed_question(question)
    chinese = passages.writes_chinese(reader)
    selection = select(stored, vector, writes_chinese=chinese)
    if selection.answered or context is None:
        return selection
    wider = passages.embed_question(context)
    return select(stored, vector, context=context, context_vector=wider, writes_chinese=chinese)


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
