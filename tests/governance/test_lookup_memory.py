"""The governed lookup on the in-memory store with a keyword embedder: the small KB is
ingested without Milvus or a model, and governance's own rules are checked on it."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from fakes.embedders import KeywordEmbedder
from superbiz.config import Settings
from superbiz.exceptions import UnknownDomainError
from superbiz.governance.lookup import GovernedLookup
from superbiz.governance.tracker import InMemorySessionTracker
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.retrieval.memory_store import InMemoryChunkStore
from superbiz.retrieval.relevance import RelevanceLevel

PAYMENT = "payment/支付失败排查.md"
REDIS = "infrastructure/redis-pool.md"
RATE_LIMIT = "api/rate-limit.md"
KEYWORDS = ["支付", "redis", "连接池", "quota", "limit", "deploy", "idempotency"]


@pytest.fixture(scope="module")
def kb(
    tmp_path_factory: pytest.TempPathFactory, kb_writer: Callable[..., Path]
) -> Iterator[KnowledgeBase]:
    root = tmp_path_factory.mktemp("lookup-memory")
    settings = Settings.model_validate(
        {
            "data_dir": root / "data",
            "database_url": f"sqlite:///{root}/superbiz.db",
            "retrieval": {
                "normalization": {"highly_relevant_threshold": 0.6, "reference_threshold": 0.3}
            },
        }
    )
    store = InMemoryChunkStore()
    base = KnowledgeBase(settings, embedder=KeywordEmbedder(KEYWORDS), store=store)
    report = Ingestor(base).ingest([kb_writer(root / "kb")])
    assert len(report.added) == 5 and not report.skipped
    assert base.store is store
    yield base
    base.close()


@pytest.fixture
def tracker() -> InMemorySessionTracker:
    return InMemorySessionTracker()


@pytest.fixture
def governed(kb: KnowledgeBase, tracker: InMemorySessionTracker) -> GovernedLookup:
    return GovernedLookup(kb, tracker)


@pytest.fixture
def session() -> str:
    return f"s-{uuid.uuid4().hex[:8]}"


def test_a_title_is_precise_and_marks_what_was_shown(
    governed: GovernedLookup, tracker: InMemorySessionTracker, session: str
) -> None:
    outcome = governed.lookup(session, "API rate limiting")
    result = outcome.result
    assert result.relevance_level is RelevanceLevel.PRECISE and result.found
    assert result.primary is not None and result.primary.path == RATE_LIMIT
    assert outcome.details.l0_match_count == 1
    assert list(tracker.retrieved_docs(session)) == outcome.details.shown
    assert result.retrieved_domains_this_session == ["api"]


def test_similarity_alone_gives_the_level_of_the_thresholds(
    governed: GovernedLookup, session: str
) -> None:
    outcome = governed.lookup(session, "redis timeouts under load")
    assert outcome.details.l0_match_count == 0
    assert outcome.ranked[0].doc_path == REDIS
    top = outcome.ranked[0].similarity
    assert top >= 0.6 and outcome.result.relevance_level is RelevanceLevel.HIGHLY_RELEVANT


def test_no_keyword_is_no_result(governed: GovernedLookup, session: str) -> None:
    outcome = governed.lookup(session, "something else entirely")
    assert outcome.result.relevance_level is None and not outcome.result.found
    assert outcome.details.shown == [] and outcome.details.dedup_reason is None


def test_the_same_question_again_is_deduped(
    governed: GovernedLookup, tracker: InMemorySessionTracker, session: str
) -> None:
    first = governed.lookup(session, "Redis 连接池耗尽")
    assert first.result.primary is not None and first.result.primary.path == REDIS
    marked = tracker.retrieved_docs(session)
    again = governed.lookup(session, "Redis 连接池耗尽")
    assert again.result.relevance_level is RelevanceLevel.DEDUPED
    assert again.result.dedup_reason == "doc_retrieved" and not again.result.found
    assert "Redis 连接池耗尽" in again.result.message
    assert again.details.already_retrieved[0] == REDIS
    assert tracker.retrieved_docs(session) == marked  # nothing new was marked
    other = governed.lookup(f"{session}-other", "Redis 连接池耗尽")
    assert other.result.relevance_level is RelevanceLevel.PRECISE


def test_infer_and_require_domain(governed: GovernedLookup) -> None:
    assert governed.infer_domain("API rate limiting") == "api"
    assert governed.infer_domain("支付 回调 超时 怎么办") == "payment"
    assert governed.require_domain(" PAYMENT ") == "payment"
    with pytest.raises(UnknownDomainError):
        governed.require_domain("billing")


def test_a_named_domain_filters_the_ranking(governed: GovernedLookup, session: str) -> None:
    outcome = governed.lookup(session, "redis quota limit", domain="api")
    assert {d.domain for d in outcome.ranked} == {"api"}
    assert outcome.result.primary is not None and outcome.result.primary.path == RATE_LIMIT
