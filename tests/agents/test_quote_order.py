"""Which document the answer reads first: the lookups' order fused with a passage model's
match (``quote_order``, ``turn_selection.model_order``); a hand-written matcher, then the
real multilingual-e5-small through the knowledge base."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from superbiz.agents.answer_selection import Passage
from superbiz.agents.context import Citation
from superbiz.agents.quote_order import QUOTE_DEPTH, PassageMatcher
from superbiz.agents.runtime import open_runtime
from superbiz.agents.turn_selection import model_order
from superbiz.config import Settings
from superbiz.evaluation.agent import builtin_dataset
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.retrieval.embedders import Embedder

QUESTION = "How many retries before the webhook gives up?"
QV = np.eye(4, dtype=np.float32)[0]


def doc(ref: int, path: str, title: str) -> Citation:
    return Citation(ref, title, path, "ops", f"shown text of {path}")


REFUND = doc(1, "payment/refund.md", "Refund guide")
WEBHOOK = doc(2, "api/webhook.md", "Webhook delivery")
DISK = doc(3, "infra/disk.md", "Disk full")
STORED = {
    WEBHOOK.path: [
        Passage("Webhook delivery", "We send outbound webhooks.", np.eye(4, dtype=np.float32)[1]),
        Passage("Webhook delivery > Retry schedule", "Retries at 1 min … 24 h.", QV),
    ],
    REFUND.path: [Passage("Refund guide", "Refunds go back the way they came.", QV * 0.5)],
}


class Matcher:
    """Gives the cosines it was made with, one per passage, and keeps what it read."""

    def __init__(self, cosines: Sequence[float] | None) -> None:
        self.cosines = cosines
        self.read: list[list[str]] = []

    def match_passages(self, question: str, passages: Sequence[str]) -> list[float] | None:
        self.read.append(list(passages))
        return None if self.cosines is None else list(self.cosines)[: len(passages)]


def test_a_document_the_model_matches_far_better_is_read_first() -> None:
    """The model ranks the lookups' first document last and their second first: the
    second is read first; the passage it read is each document's chunk nearest the
    question (the webhook's retry schedule, not its opening), under the title."""
    matcher = Matcher([0.2, 0.9, 0.5])
    placed = {REFUND.path, WEBHOOK.path, DISK.path}

    order = model_order(QUESTION, [REFUND, WEBHOOK, DISK], placed, STORED, QV, matcher)

    assert order == [WEBHOOK, REFUND, DISK]
    assert isinstance(matcher, PassageMatcher)
    assert matcher.read == [
        [
            "Refund guide\nRefunds go back the way they came.",
            "Webhook delivery\nRetries at 1 min … 24 h.",
            "Disk full\nshown text of infra/disk.md",  # no stored chunk: what it was shown
        ]
    ]


@pytest.mark.parametrize(
    "cosines",
    [pytest.param([0.8, 0.9, 0.1], id="neighbours-swapped"), pytest.param(None, id="no-model")],
)
def test_the_lookups_order_stands(cosines: list[float] | None) -> None:
    """A model that only swaps two neighbours ties with the lookups' order, which wins;
    without a model (``match_passages`` gives None) nothing moves."""
    placed = {REFUND.path, WEBHOOK.path, DISK.path}
    order = model_order(QUESTION, [REFUND, WEBHOOK, DISK], placed, STORED, QV, Matcher(cosines))
    assert order == [REFUND, WEBHOOK, DISK]


def test_only_the_first_documents_this_turn_ranked_are_reordered() -> None:
    """A document carried from an earlier turn (read after this turn's) and those past
    ``QUOTE_DEPTH`` keep their places; one document alone asks the model nothing."""
    carried = doc(9, "old/earlier.md", "Earlier turn")
    matcher = Matcher([0.1, 0.9])
    order = model_order(
        QUESTION, [REFUND, WEBHOOK, carried], {REFUND.path, WEBHOOK.path}, STORED, QV, matcher
    )
    assert order == [REFUND, WEBHOOK, carried]  # two: the model only swaps neighbours
    assert len(matcher.read[0]) == 2

    many = [doc(10 + i, f"d/{i}.md", f"Doc {i}") for i in range(QUOTE_DEPTH + 2)]
    deep = Matcher([0.0, 1.0] + [0.5] * QUOTE_DEPTH)  # the lookups' first ranked last
    order = model_order(QUESTION, many, {d.path for d in many}, {}, QV, deep)
    assert len(deep.read[0]) == QUOTE_DEPTH
    assert order[:2] == [many[1], many[0]]
    assert order[QUOTE_DEPTH:] == many[QUOTE_DEPTH:]

    alone = Matcher([1.0])
    assert model_order(QUESTION, [REFUND, carried], {REFUND.path}, STORED, QV, alone) == [
        REFUND,
        carried,
    ]
    assert alone.read == []


def test_the_real_passage_model_prefers_the_passage_that_answers(tmp_path: Path) -> None:
    """multilingual-e5-small, configured by ``retrieval.answers.passages: e5``, matches a
    Chinese follow-up with the English retry schedule that answers it rather than a page
    that shares its subject; unconfigured, the knowledge base offers no match."""
    settings = Settings(data_dir=tmp_path / "e5", retrieval={"answers": {"passages": "e5"}})
    kb = KnowledgeBase(settings)
    try:
        cosines = kb.match_passages(
            "webhook 重试几次之后会放弃？",
            [
                "Webhook setup\nRegister an HTTPS endpoint and choose the events to receive.",
                "Webhook delivery\nA failed delivery is retried 8 times over 24 hours, "
                "then the event is marked failed and no longer sent.",
            ],
        )
    finally:
        kb.close()
    assert cosines is not None and cosines[1] > cosines[0]

    plain = KnowledgeBase(Settings(data_dir=tmp_path / "plain"))
    try:
        assert plain.match_passages(QUESTION, ["anything"]) is None
    finally:
        plain.close()


class RefundGuideFirst(KnowledgeBase):
    """The example knowledge base with a hand-written passage model that matches the
    refund guide best and the chargeback FAQ worst (the real model is tested above)."""

    read: tuple[str, ...] = ()

    def match_passages(self, question: str, passages: Sequence[str]) -> list[float] | None:
        self.read = tuple(passages)
        return [
            0.9 if p.startswith("退款处理指南") else 0.1 if p.startswith("Chargeback") else 0.5
            for p in passages
        ]


def test_a_turn_quotes_first_what_the_passage_model_moved_up(
    tmp_path: Path, use_embedder: Embedder
) -> None:
    """Through a whole turn: the lookup ranks the chargeback FAQ, the refund guide and
    the reconciliation runbook for "How do I issue a refund?"; the answer reads the
    three passages to the model and quotes the refund guide, which it moved up, first."""
    settings = Settings(data_dir=tmp_path / "data")
    kb = RefundGuideFirst(settings, embedder=use_embedder)
    with open_runtime(settings, kb=kb) as runtime:
        Ingestor(kb).ingest([builtin_dataset() / "corpus"])
        turn = runtime.ask("s1", "How do I issue a refund?").result

    [lookup] = turn.lookups
    assert lookup.shown[0] == "payment/chargeback-faq.md"
    assert [p.split("\n")[0] for p in kb.read] == [
        "Chargeback and dispute handling FAQ",
        "退款处理指南",
        "Payment reconciliation mismatch runbook",
    ]
    assert turn.citations[0].path == "payment/refund-guide.md"
