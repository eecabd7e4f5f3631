"""The governed lookup on a real small KB (USE + Milvus Lite + SQLite): levels and hints,
session dedup, domain filtering, what the model sees and what the record keeps."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from expectations import RESULT_KEYS, SEED_DETAIL_KEYS
from superbiz.config import Settings
from superbiz.exceptions import UnknownDomainError
from superbiz.governance.lookup import GovernedLookup, LookupOutcome
from superbiz.governance.results import LookupResult
from superbiz.governance.tracker import InMemorySessionTracker, SqlSessionTracker
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.retrieval.embedders import Embedder
from superbiz.retrieval.relevance import RelevanceLevel, completeness_hint, relevance_level

PAYMENT = "payment/支付失败排查.md"
REDIS = "infrastructure/redis-pool.md"
RATE_LIMIT = "api/rate-limit.md"
# An English paraphrase with no exact term of the KB in it: found by L1 only.
EN_PARAPHRASE = "how to raise the per-tenant request limit"


@pytest.fixture(scope="module")
def kb(
    tmp_path_factory: pytest.TempPathFactory,
    use_embedder: Embedder,
    kb_writer: Callable[..., Path],
) -> Iterator[KnowledgeBase]:
    root = tmp_path_factory.mktemp("lookup")
    folder = kb_writer(root / "kb")
    settings = Settings(data_dir=root / "data", database_url=f"sqlite:///{root}/superbiz.db")
    base = KnowledgeBase(settings, embedder=use_embedder)
    report = Ingestor(base).ingest([folder])
    assert len(report.added) == 5 and not report.skipped
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


def expected_level(kb: KnowledgeBase, outcome: LookupOutcome) -> RelevanceLevel | None:
    top = outcome.ranked[0].similarity if outcome.ranked else None
    return relevance_level(outcome.details.l0_match_count, top, kb.thresholds)


def all_keys(value: Any) -> set[str]:
    if isinstance(value, dict):
        keys = set(value)
        for item in value.values():
            keys |= all_keys(item)
        return keys
    if isinstance(value, list):
        return set().union(*(all_keys(item) for item in value)) if value else set()
    return set()


# -- levels and hints ------------------------------------------------------------------------


def test_chinese_title_is_precise(governed: GovernedLookup, session: str) -> None:
    outcome = governed.lookup(session, "支付失败排查")
    result = outcome.result
    assert outcome.language == "zh"
    assert result.found
    assert result.relevance_level is RelevanceLevel.PRECISE
    assert result.completeness_hint == "知识库中不存在比上述结果更精准的文档"
    assert result.primary is not None
    assert (result.primary.path, result.primary.title, result.primary.domain) == (
        PAYMENT,
        "支付失败排查",
        "payment",
    )
    assert "回调超时" in result.primary.content
    assert result.message.startswith("找到") and "《支付失败排查》" in result.message
    assert result.retrieved_domains_this_session == ["payment"]
    assert result.dedup_reason is None
    assert outcome.details.l0_match_count == 1
    assert outcome.details.l0_titles == ["支付失败排查"]


def test_chinese_question_naming_a_cover_is_precise(governed: GovernedLookup, session: str) -> None:
    result = governed.lookup(session, "支付回调超时了怎么处理").result
    assert result.relevance_level is RelevanceLevel.PRECISE
    assert result.primary is not None and result.primary.path == PAYMENT


def test_english_paraphrase_is_found_with_an_english_hint(
    kb: KnowledgeBase, governed: GovernedLookup, session: str
) -> None:
    outcome = governed.lookup(session, EN_PARAPHRASE)
    result = outcome.result
    assert outcome.language == "en"
    assert outcome.details.l0_match_count == 0  # L1 alone found it
    assert result.found
    assert result.relevance_level in (RelevanceLevel.HIGHLY_RELEVANT, RelevanceLevel.REFERENCE)
    assert result.relevance_level is expected_level(kb, outcome)
    assert result.completeness_hint == completeness_hint(result.relevance_level, "en")
    assert result.primary is not None and result.primary.path == RATE_LIMIT
    assert result.message.startswith("Found") and '"API rate limiting"' in result.message
    assert result.retrieved_domains_this_session == ["api"]


def test_level_follows_the_table_for_every_query(
    kb: KnowledgeBase, governed: GovernedLookup
) -> None:
    queries = [
        "支付失败排查",
        "Redis 连接池耗尽",
        EN_PARAPHRASE,
        "退款为什么会失败",
        "repeating a request has the same effect",
        "weather in paris tomorrow",
        "今天天气怎么样",
    ]
    for i, query in enumerate(queries):
        outcome = governed.lookup(f"table-{i}", query)
        assert outcome.result.relevance_level is expected_level(kb, outcome), query
        assert outcome.result.found == (outcome.result.relevance_level is not None)


def test_no_result(governed: GovernedLookup, tracker: InMemorySessionTracker, session: str) -> None:
    result = governed.lookup(session, "weather in paris tomorrow").result
    assert not result.found
    assert result.relevance_level is None
    assert result.primary is None and result.supplement == []
    assert result.completeness_hint == completeness_hint(None, "en")
    assert result.message == "No relevant document was found in the knowledge base"
    assert result.dedup_reason is None
    assert tracker.retrieved_docs(session) == {}
    zh = governed.lookup(session, "今天天气怎么样").result
    assert not zh.found and zh.completeness_hint == completeness_hint(None, "zh")
    assert zh.message == "知识库中没有找到与该问题相关的文档"


def test_primary_content_has_no_index_header(governed: GovernedLookup, session: str) -> None:
    result = governed.lookup(session, "Redis 连接池耗尽").result
    assert result.primary is not None and result.primary.path == REDIS
    assert result.primary.content.startswith("# Redis 连接池耗尽")
    assert len(result.primary.content) <= 2 * 1200 + 1


# -- session dedup ----------------------------------------------------------------------------


def test_same_query_again_is_deduped(
    governed: GovernedLookup, tracker: InMemorySessionTracker, session: str
) -> None:
    first = governed.lookup(session, "支付失败排查").result
    assert first.relevance_level is RelevanceLevel.PRECISE
    marked = tracker.retrieved_docs(session)
    assert marked == {PAYMENT: "payment"}

    again = governed.lookup(session, "支付失败排查")
    result = again.result
    assert result.relevance_level is RelevanceLevel.DEDUPED
    assert result.dedup_reason == "doc_retrieved"
    assert not result.found
    assert result.primary is None and result.supplement == []
    assert "《支付失败排查》" in result.message and "已检索过" in result.message
    assert result.completeness_hint == completeness_hint(RelevanceLevel.DEDUPED, "zh")
    assert result.retrieved_domains_this_session == ["payment"]
    assert tracker.retrieved_docs(session) == marked  # nothing new marked
    assert again.details.dedup_reason == "doc_retrieved"
    assert again.details.relevance_level == "DEDUPED"
    assert again.details.already_retrieved == [PAYMENT]
    assert again.details.shown == []


def test_english_dedup_message(governed: GovernedLookup, session: str) -> None:
    assert governed.lookup(session, EN_PARAPHRASE).result.found
    result = governed.lookup(session, EN_PARAPHRASE).result
    assert result.relevance_level is RelevanceLevel.DEDUPED
    assert '"API rate limiting"' in result.message and "already retrieved" in result.message
    assert result.completeness_hint == completeness_hint(RelevanceLevel.DEDUPED, "en")


@pytest.mark.parametrize(
    ("question", "answers"),
    [
        ("Redis 连接池耗尽", True),
        ("Redis 慢查询怎么排查", False),
        ("Redis 缓存命中率下降怎么办", False),
    ],
)
def test_what_the_session_holds_is_named_and_said_whether_it_answers(
    governed: GovernedLookup, session: str, question: str, answers: bool
) -> None:
    """After the Redis runbook was shown, a lookup that ranks it first is DEDUPED, never
    "nothing in the knowledge base" (the cache-hit question reaches it by its words, under
    the cosine reference); the message says whether the held runbook would have answered."""
    assert governed.lookup(session, "Redis 连接池耗尽").result.primary is not None
    outcome = governed.lookup(session, question)
    assert outcome.result.relevance_level is RelevanceLevel.DEDUPED
    assert outcome.details.withheld[0] == REDIS
    assert "《Redis 连接池耗尽》" in outcome.result.message
    assert ("不能明确回答" in outcome.result.message) is not answers
    good = outcome.details.held_level in ("PRECISE", "HIGHLY_RELEVANT")
    assert good is answers


def test_another_session_is_unaffected(governed: GovernedLookup, session: str) -> None:
    governed.lookup(session, "支付失败排查")
    other = governed.lookup(session + "-other", "支付失败排查").result
    assert other.relevance_level is RelevanceLevel.PRECISE
    assert other.primary is not None and other.primary.path == PAYMENT
    assert other.retrieved_domains_this_session == ["payment"]


def test_cleared_session_finds_again(
    governed: GovernedLookup, tracker: InMemorySessionTracker, session: str
) -> None:
    governed.lookup(session, "支付失败排查")
    tracker.clear_session(session)
    assert governed.lookup(session, "支付失败排查").result.relevance_level is RelevanceLevel.PRECISE


def test_retrieved_domains_grow(governed: GovernedLookup, session: str) -> None:
    seen = []
    for query, domain in [
        ("支付失败排查", "payment"),
        ("Redis 连接池耗尽", "infrastructure"),
        (EN_PARAPHRASE, "api"),
    ]:
        result = governed.lookup(session, query).result
        assert result.found and result.primary is not None
        seen.append(domain)
        assert result.retrieved_domains_this_session[: len(seen)] == seen
    deduped = governed.lookup(session, "支付失败排查").result
    assert deduped.relevance_level is RelevanceLevel.DEDUPED
    assert deduped.retrieved_domains_this_session[:3] == seen


def test_dedup_survives_a_new_lookup_object_with_the_sql_tracker(
    kb: KnowledgeBase, session: str
) -> None:
    assert (
        GovernedLookup(kb, SqlSessionTracker(kb.engine))
        .lookup(session, "支付失败排查")
        .result.found
    )
    again = GovernedLookup(kb, SqlSessionTracker(kb.engine)).lookup(session, "支付失败排查").result
    assert again.relevance_level is RelevanceLevel.DEDUPED
    SqlSessionTracker(kb.engine).clear_session(session)


# -- domains -----------------------------------------------------------------------------------


def test_domain_filter(governed: GovernedLookup, session: str) -> None:
    outcome = governed.lookup(session, "Redis 连接池耗尽", domain="api")
    assert all(doc.domain == "api" for doc in outcome.ranked)
    assert outcome.details.l0_match_count == 0  # the exact match is in another domain
    assert REDIS not in outcome.details.shown
    inside = governed.lookup(session + "-2", "Redis 连接池耗尽", domain="infrastructure")
    assert inside.result.relevance_level is RelevanceLevel.PRECISE
    assert {doc.domain for doc in inside.ranked} == {"infrastructure"}


def test_domain_is_normalised(governed: GovernedLookup, session: str) -> None:
    result = governed.lookup(session, "支付失败排查", domain="  PAYMENT ").result
    assert result.primary is not None and result.primary.domain == "payment"


def test_unknown_domain_lists_the_known_ones(
    governed: GovernedLookup, tracker: InMemorySessionTracker, session: str
) -> None:
    with pytest.raises(UnknownDomainError) as info:
        governed.lookup(session, "支付失败排查", domain="billing")
    assert info.value.known == ["api", "general", "infrastructure", "ops", "payment"]
    assert str(info.value) == (
        "unknown domain 'billing'; known domains: api, general, infrastructure, ops, payment"
    )
    assert tracker.retrieved_docs(session) == {}


# -- what the model sees and what the record keeps --------------------------------------------


@pytest.mark.parametrize("query", ["支付失败排查", EN_PARAPHRASE, "weather in paris tomorrow"])
def test_the_model_sees_no_raw_scores(governed: GovernedLookup, session: str, query: str) -> None:
    for outcome in (governed.lookup(session, query), governed.lookup(session, query)):
        data = outcome.result.as_dict()
        assert set(data) == RESULT_KEYS
        for key in all_keys(data):
            assert "score" not in key and "similarity" not in key, key
        json.dumps(data, ensure_ascii=False)  # one JSON object, as the CLI prints it
        if data["primary"] is not None:
            assert set(data["primary"]) == {"title", "domain", "path", "heading", "content"}
        for item in data["supplement"]:
            assert set(item) == {"title", "domain", "path", "excerpt"}


def test_lookup_result_dataclass_has_no_score_fields() -> None:
    names = {name for name in LookupResult.__dataclass_fields__}
    assert not any("score" in name or "similarity" in name for name in names)


@pytest.mark.parametrize("query", ["支付失败排查", EN_PARAPHRASE, "退款为什么会失败"])
def test_retrieval_details_have_the_seed_keys(
    governed: GovernedLookup, session: str, query: str
) -> None:
    outcome = governed.lookup(session, query)
    details = outcome.details.as_dict()
    assert set(details) >= SEED_DETAIL_KEYS
    assert details["l1_top_score"] is not None
    assert details["l1_top_similarity"] == pytest.approx(1 - details["l1_top_score"] / 2, abs=1e-6)
    assert details["l1_match_count"] == len(outcome.ranked) > 0
    assert len(details["l1_scores"]) == min(10, len(outcome.ranked))
    assert details["relevance_level"] == (
        outcome.result.relevance_level.value if outcome.result.relevance_level else None
    )
    assert details["completeness_hint"] == outcome.result.completeness_hint
    assert details["retrieved_domains"] == outcome.result.retrieved_domains_this_session
    assert details["dedup_reason"] == outcome.result.dedup_reason
    assert details["l0_match_count"] == len(details["l0_titles"])
    json.dumps(details)


def test_l1_scores_are_the_raw_backend_scores(governed: GovernedLookup, session: str) -> None:
    details = governed.lookup(session, EN_PARAPHRASE).details
    assert details.l1_scores[0] == pytest.approx(details.l1_top_score, abs=1e-5)
    assert details.l1_scores == sorted(details.l1_scores)  # distances: smaller is better


# -- an exact match that L1 missed, after dedup ---------------------------------------------------


@pytest.fixture
def narrow_kb(tmp_path: Path, use_embedder: Embedder, small_kb: Path) -> Iterator[KnowledgeBase]:
    """The small KB searched with a single L1 candidate, so L1 can miss an exact match."""
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=f"sqlite:///{tmp_path}/superbiz.db",
        advanced={"retrieval": {"candidates": 1}},
    )
    base = KnowledgeBase(settings, embedder=use_embedder)
    Ingestor(base).ingest([small_kb])
    yield base
    base.close()


def test_fresh_exact_match_is_shown_after_dedup_of_the_other(narrow_kb: KnowledgeBase) -> None:
    tracker = InMemorySessionTracker()
    tracker.mark_many("s", [("infrastructure", REDIS)])
    outcome = GovernedLookup(narrow_kb, tracker).lookup("s", "支付失败排查 和 Redis 连接池耗尽")
    assert outcome.result.found
    assert outcome.result.relevance_level is RelevanceLevel.PRECISE
    assert outcome.result.primary is not None and outcome.result.primary.path == PAYMENT
    # recorded: the level's input (one fresh match), and both titles the query named
    assert outcome.details.l0_match_count == 1
    assert sorted(outcome.details.l0_titles) == ["Redis 连接池耗尽", "支付失败排查"]


def test_a_deduped_result_records_the_scores_its_level_came_from(
    governed: GovernedLookup, session: str
) -> None:
    first = governed.lookup(session, "Redis 连接池耗尽")
    second = governed.lookup(session, "Redis 连接池耗尽")

    assert second.result.relevance_level is RelevanceLevel.DEDUPED
    assert first.details.l0_match_count == 1 and second.details.l0_match_count == 0
    top = first.details.l1_top_similarity  # the runbook itself, ranked first both times
    assert top is not None and second.ranked[0].similarity == pytest.approx(top)
    fresh = second.details.l1_top_similarity  # the best document the session lacks
    assert fresh is None or fresh < top
