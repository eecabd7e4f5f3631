"""``lookup_knowledge`` as a governed tool (``LookupTurn``) on a real small KB.

Real USE embedder and Milvus Lite (the session's ``governed_kb``); action memory and the
``tool_invocation`` record on SQLite and on PostgreSQL (``database_url``). Each test checks
what the model sees, what the governor decided, whether the vector store was touched,
and the row that was recorded.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, text

from expectations import RESULT_KEYS, SEED_DETAIL_KEYS
from superbiz.access import Reader
from superbiz.config import GovernanceConfig
from superbiz.governance.lookup import GovernedLookup
from superbiz.governance.results import LookupResult, ToolOutcome
from superbiz.governance.tool import LOOKUP_KNOWLEDGE, LookupTurn
from superbiz.governance.tracker import SqlSessionTracker
from superbiz.governance.verdicts import DomainState, Situation, Verdict, breaker_message
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.retrieval.relevance import RelevanceLevel
from superbiz.storage.db import open_database
from superbiz.storage.invocations import TOOL_NAME, Invocation, InvocationRepository

PAYMENT = "payment/支付失败排查.md"
REDIS = "infrastructure/redis-pool.md"
RATE_LIMIT = "api/rate-limit.md"


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    engine = open_database(database_url)
    yield engine
    engine.dispose()


@pytest.fixture
def recorder(engine: Engine) -> InvocationRepository:
    return InvocationRepository(engine)


@pytest.fixture
def lookup(governed_kb: KnowledgeBase, engine: Engine) -> GovernedLookup:
    return GovernedLookup(governed_kb, SqlSessionTracker(engine))


@pytest.fixture
def make_turn(lookup: GovernedLookup, recorder: InvocationRepository) -> Callable[..., LookupTurn]:
    def make(
        language: str = "zh", *, turn: int = 1, session_id: str | None = None, **governance: Any
    ) -> LookupTurn:
        return LookupTurn(
            lookup,
            GovernanceConfig(**governance),
            session_id=session_id or f"tool-{uuid.uuid4().hex[:8]}",
            turn=turn,
            language=language,  # type: ignore[arg-type]
            recorder=recorder,
        )

    return make


@pytest.fixture
def searches(governed_kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts every search the vector store and the hybrid searcher run."""
    counter: Counter[str] = Counter()

    def count(target: object, method: str, label: str) -> None:
        original = getattr(target, method)

        def counted(*args: Any, **kwargs: Any) -> Any:
            counter[label] += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(target, method, counted)

    count(governed_kb.searcher, "search", "hybrid")
    count(governed_kb.store, "search_dense", "dense")
    count(governed_kb.store, "search_bm25", "bm25")
    count(governed_kb.store, "chunks_of", "chunks")
    return counter


def rows(recorder: InvocationRepository, turn: LookupTurn) -> list[Invocation]:
    return recorder.for_session(turn.session_id)


def assert_blocked(outcome: ToolOutcome, reason: str) -> None:
    assert not outcome.executed
    assert outcome.error is None
    assert outcome.level is RelevanceLevel.DEDUPED
    assert outcome.dedup_reason == reason
    assert outcome.details is None and outcome.shown == []
    view = outcome.model_view()
    assert set(view) == RESULT_KEYS
    assert view["relevance_level"] == "DEDUPED" and view["dedup_reason"] == reason
    assert view["found"] is False and view["primary"] is None and view["supplement"] == []


def assert_row_matches(row: Invocation, outcome: ToolOutcome, turn: LookupTurn) -> None:
    assert row.session_id == turn.session_id
    assert row.turn == turn.turn
    assert row.arguments == outcome.arguments
    assert row.domain == outcome.domain
    assert row.executed is outcome.executed
    assert row.relevance_level == (outcome.level.value if outcome.level else None)
    assert row.dedup_reason == outcome.dedup_reason
    assert row.water_level == outcome.water_level.value
    assert row.verdict == ("error" if outcome.error else outcome.verdict.value)
    assert row.error == outcome.error
    assert row.latency_ms == pytest.approx(outcome.latency_ms, abs=0.01)
    assert row.origin == outcome.origin
    assert row.id is not None and row.created_at is not None


# -- an executed call --------------------------------------------------------------------


def test_executed_call_returns_a_result_and_records_one_row(
    make_turn: Callable[..., LookupTurn],
    recorder: InvocationRepository,
    searches: Counter[str],
) -> None:
    turn = make_turn("zh", turn=3)

    outcome = turn.call({"query": "支付失败排查"}, call_id="c1", step=2)

    assert outcome.executed and outcome.error is None and outcome.call_id == "c1"
    assert isinstance(outcome.result, LookupResult)
    assert outcome.level is RelevanceLevel.PRECISE
    assert outcome.domain == "payment"
    assert outcome.shown == [PAYMENT]
    assert outcome.water_level.value == "low"
    assert outcome.verdict is Verdict.ANSWER
    assert searches["hybrid"] == 1
    view = outcome.model_view()
    assert view == outcome.result.as_dict()
    assert set(view) == RESULT_KEYS
    assert view["primary"]["path"] == PAYMENT
    assert not any(key.startswith("l1_") or key.startswith("l0_") for key in view)
    assert turn.governor.calls == 1
    assert turn.governor.domain_state("payment") is DomainState.CLOSED

    [row] = rows(recorder, turn)
    assert_row_matches(row, outcome, turn)
    assert (row.turn, row.step, row.tool_name) == (3, 2, TOOL_NAME)
    assert row.arguments == {"query": "支付失败排查"}
    assert (row.domain, row.relevance_level, row.dedup_reason) == ("payment", "PRECISE", None)
    assert (row.executed, row.verdict, row.water_level) == (True, "answer", "low")
    assert row.latency_ms > 0
    details = row.retrieval_details
    assert details is not None and set(details) >= SEED_DETAIL_KEYS
    assert details["relevance_level"] == "PRECISE"
    assert details["l0_match_count"] == 1 and details["l0_titles"] == ["支付失败排查"]
    assert details["shown"] == [PAYMENT]
    assert details["retrieved_domains"] == ["payment"]
    assert isinstance(details["l1_top_similarity"], float)
    assert len(details["l1_scores"]) == min(details["l1_match_count"], 10) > 0


def test_a_planned_call_is_recorded_with_its_origin_and_counted(
    make_turn: Callable[..., LookupTurn], recorder: InvocationRepository
) -> None:
    turn = make_turn("zh")

    planned = turn.call({"query": "支付失败排查", "domain": "payment"}, origin="plan")
    again = turn.call({"query": "支付失败 怎么办", "domain": "payment"}, call_id="c2", step=1)

    assert (planned.origin, planned.executed) == ("plan", True)
    assert (again.origin, again.executed) == ("model", False)  # the plan's lookup closed it
    assert turn.governor.calls == 2
    first, second = rows(recorder, turn)
    assert_row_matches(first, planned, turn)
    assert_row_matches(second, again, turn)
    assert (first.origin, first.step, second.origin) == ("plan", 0, "model")


def test_the_tool_spec_offers_exactly_the_three_arguments() -> None:
    assert LOOKUP_KNOWLEDGE.name == TOOL_NAME == "lookup_knowledge"
    parameters = LOOKUP_KNOWLEDGE.parameters
    assert set(parameters["properties"]) == {"query", "domain", "missing_dimension"}
    assert parameters["required"] == ["query"]
    assert parameters["additionalProperties"] is False
    assert LOOKUP_KNOWLEDGE.to_openai()["function"]["name"] == "lookup_knowledge"


# -- blocked calls -----------------------------------------------------------------------


def test_second_call_in_a_closed_domain_is_blocked_without_retrieval(
    make_turn: Callable[..., LookupTurn],
    recorder: InvocationRepository,
    searches: Counter[str],
) -> None:
    turn = make_turn("zh")
    first = turn.call({"query": "支付失败排查"}, call_id="c1", step=1)
    assert first.level is RelevanceLevel.PRECISE
    searches.clear()

    second = turn.call({"query": "退款失败怎么处理", "domain": "payment"}, call_id="c2", step=2)

    assert_blocked(second, "domain_retrieved")
    assert sum(searches.values()) == 0  # the domain was named: nothing searched at all
    assert second.domain == "payment"
    assert "payment" in second.result.message and "已被拦截" in second.result.message
    assert second.result.retrieved_domains_this_session == ["payment"]
    assert second.water_level.value == "low"
    assert turn.governor.calls == 2  # a blocked call still raises the water level
    assert second.verdict is Verdict.ANSWER
    assert second.constraint.message == breaker_message(
        Situation.BLOCKED, "zh", closed_domains=("payment",), budget_left=6
    )

    first_row, second_row = rows(recorder, turn)
    assert first_row.executed and first_row.relevance_level == "PRECISE"
    assert_row_matches(second_row, second, turn)
    assert (second_row.executed, second_row.relevance_level, second_row.dedup_reason) == (
        False,
        "DEDUPED",
        "domain_retrieved",
    )
    assert second_row.retrieval_details is None
    assert second_row.arguments == {"query": "退款失败怎么处理", "domain": "payment"}
    assert second_row.step == 2


def test_a_call_inferred_into_a_closed_domain_is_blocked_before_any_search(
    make_turn: Callable[..., LookupTurn], searches: Counter[str]
) -> None:
    turn = make_turn("zh")
    turn.call({"query": "支付失败排查"})
    searches.clear()

    blocked = turn.call({"query": "退款失败了怎么办"})  # names no domain: inferred

    assert_blocked(blocked, "domain_retrieved")
    assert blocked.domain == "payment"
    assert searches["hybrid"] == 0 and searches["bm25"] == 0 and searches["chunks"] == 0


def test_budget_exhausted_at_high_water(
    make_turn: Callable[..., LookupTurn],
    recorder: InvocationRepository,
    searches: Counter[str],
) -> None:
    turn = make_turn("en", low_max_calls=1, high_min_calls=2)
    turn.call({"query": "支付失败排查"})
    second = turn.call({"query": "Redis 连接池耗尽"})
    assert second.executed and second.domain == "infrastructure"
    assert second.water_level.value == "low"  # the level the call was admitted at
    assert second.verdict is Verdict.STOP and not second.constraint.tools_allowed
    searches.clear()

    third = turn.call({"query": "API rate limiting", "domain": "api"}, step=3)

    assert_blocked(third, "budget_exhausted")
    assert sum(searches.values()) == 0
    assert third.water_level.value == "high"
    assert third.verdict is Verdict.STOP
    assert "budget is exhausted" in third.result.message
    row = rows(recorder, turn)[-1]
    assert_row_matches(row, third, turn)
    assert (row.executed, row.dedup_reason, row.water_level, row.verdict) == (
        False,
        "budget_exhausted",
        "high",
        "stop",
    )


def test_supplement_needs_a_dimension_after_reference_and_is_admitted_with_one(
    make_turn: Callable[..., LookupTurn],
    recorder: InvocationRepository,
    searches: Counter[str],
) -> None:
    turn = make_turn("en")
    first = turn.call({"query": "API quota"})
    assert first.executed and first.domain == "api"
    assert first.level is RelevanceLevel.REFERENCE  # precondition of this test
    assert first.verdict is Verdict.SUPPLEMENT
    assert first.constraint.supplement_domains == ("api",)
    assert turn.governor.domain_state("api") is DomainState.SUPPLEMENT
    searches.clear()

    reworded = turn.call({"query": "API quota limits per tenant", "domain": "api"})

    assert_blocked(reworded, "supplement_needs_dimension")
    assert sum(searches.values()) == 0
    assert "missing_dimension" in reworded.result.message
    assert reworded.constraint.message == breaker_message(
        Situation.BLOCKED_NEEDS_DIMENSION,
        "en",
        closed_domains=(),
        budget_left=6,
        supplement_domains=("api",),
    )

    blank = turn.call({"query": "API quota", "domain": "api", "missing_dimension": "  "})
    assert_blocked(blank, "supplement_needs_dimension")

    supplement = turn.call(
        {"query": "API quota", "domain": "api", "missing_dimension": "how to raise the limit"}
    )
    assert supplement.executed and supplement.domain == "api"
    assert searches["hybrid"] == 1
    assert turn.governor.domain_state("api") is DomainState.CLOSED

    after = turn.call({"query": "API quota", "domain": "api", "missing_dimension": "examples"})
    assert_blocked(after, "domain_retrieved")

    recorded = rows(recorder, turn)
    assert [r.executed for r in recorded] == [True, False, False, True, False]
    assert [r.dedup_reason for r in recorded][1:3] == ["supplement_needs_dimension"] * 2
    assert recorded[3].arguments["missing_dimension"] == "how to raise the limit"
    assert recorded[3].retrieval_details is not None


# -- malformed calls -----------------------------------------------------------------------

MALFORMED: list[tuple[str, str, dict[str, Any] | None, str | None, str]] = [
    # (id, tool name, arguments, client error, expected error text)
    (
        "invalid-json",
        TOOL_NAME,
        None,
        "arguments are not valid JSON: Expecting value",
        "arguments are not valid JSON",
    ),
    ("arguments-none", TOOL_NAME, None, None, "arguments must be a JSON object"),
    ("unknown-tool", "search_web", {"query": "支付失败"}, None, "unknown tool 'search_web'"),
    ("no-tool-name", "", {"query": "支付失败"}, None, "unknown tool ''"),
    ("missing-query", TOOL_NAME, {}, None, "'query' is required"),
    ("empty-query", TOOL_NAME, {"query": ""}, None, "'query' is required"),
    ("blank-query", TOOL_NAME, {"query": "   "}, None, "'query' is required"),
    ("number-query", TOOL_NAME, {"query": 42}, None, "'query' is required"),
    ("number-domain", TOOL_NAME, {"query": "支付失败", "domain": 7}, None, "'domain' must be"),
    (
        "list-dimension",
        TOOL_NAME,
        {"query": "支付失败", "missing_dimension": ["a"]},
        None,
        "'missing_dimension' must be a string",
    ),
    (
        "unknown-keys",
        TOOL_NAME,
        {"query": "支付失败", "topic": "x", "k": 5},
        None,
        "unknown arguments: k, topic",
    ),
    (
        "unknown-domain",
        TOOL_NAME,
        {"query": "支付失败", "domain": "billing"},
        None,
        "unknown domain 'billing'; known domains: api, general, infrastructure, ops, payment",
    ),
]


def test_malformed_calls_are_answered_with_an_error_recorded_and_not_counted(
    make_turn: Callable[..., LookupTurn],
    recorder: InvocationRepository,
    searches: Counter[str],
) -> None:
    # One turn for all cases: none of them may raise the water level or lead to withholding.
    turn = make_turn("zh", withhold_after_blocked=1, high_min_calls=3)

    for step, (case, tool_name, arguments, client_error, expected) in enumerate(MALFORMED, 1):
        outcome = turn.call(
            arguments, call_id=case, step=step, tool_name=tool_name, error=client_error
        )

        assert not outcome.executed, case
        assert outcome.error is not None and expected in outcome.error, case
        assert outcome.model_view() == {"error": outcome.error}, case
        assert outcome.result is None and outcome.level is None, case
        assert outcome.dedup_reason is None, case
        assert outcome.constraint.tools_allowed and outcome.constraint.budget_left == 3, case

    assert sum(searches.values()) == 0
    assert turn.governor.calls == 0  # not lookups: the water level did not move
    assert not turn.governor.withheld
    recorded = rows(recorder, turn)
    assert len(recorded) == len(MALFORMED)
    for row, outcome, (case, tool_name, arguments, _, _) in zip(
        recorded, turn.outcomes, MALFORMED, strict=True
    ):
        assert_row_matches(row, outcome, turn)
        assert row.verdict == "error" and row.executed is False, case
        assert row.tool_name == (tool_name or "?"), case
        assert row.arguments == dict(arguments or {}), case
        assert row.relevance_level is None and row.retrieval_details is None, case

    good = turn.call({"query": "Redis 连接池耗尽"})
    assert good.executed and good.water_level.value == "low"
    assert good.constraint.budget_left == 2


# -- domain inference -----------------------------------------------------------------------


def test_a_paraphrase_is_inferred_to_the_domain_of_the_earlier_query(
    make_turn: Callable[..., LookupTurn], lookup: GovernedLookup, monkeypatch: pytest.MonkeyPatch
) -> None:
    inferred: list[str] = []
    original = lookup.infer_domain

    def infer(query: str, reader: Reader | None = None) -> str | None:
        inferred.append(query)
        return original(query, reader)

    monkeypatch.setattr(lookup, "infer_domain", infer)
    turn = make_turn("zh")
    first = turn.call({"query": "Redis 连接池耗尽"})
    assert first.executed and first.domain == "infrastructure"
    assert inferred == ["Redis 连接池耗尽"]

    paraphrase = turn.call({"query": "Redis 连接池耗尽的详细说明"})

    assert inferred == ["Redis 连接池耗尽"]  # the turn's own memory answered, not the KB
    assert paraphrase.domain == "infrastructure"
    assert_blocked(paraphrase, "domain_retrieved")

    other = turn.call({"query": "支付回调超时"})
    assert inferred[-1] == "支付回调超时"
    assert other.executed and other.domain == "payment"


def test_a_planned_lookup_that_misses_its_domain_searches_the_whole_kb(
    make_turn: Callable[..., LookupTurn],
) -> None:
    """The plan's domain is the planner's guess: when nothing there answers, the same
    lookup searches the whole knowledge base, and the matrix records the domain of the
    document it shows; the model's paraphrase of it is then blocked there."""
    turn = make_turn("zh")
    planned = turn.call({"query": "Redis 连接池耗尽", "domain": "payment"}, origin="plan")

    assert planned.executed and planned.details is not None and planned.details.widened
    assert planned.shown[0] == REDIS and planned.domain == "infrastructure"
    assert turn.governor.calls == 1  # one lookup of the budget
    assert_blocked(turn.call({"query": "Redis 连接池耗尽的详细说明"}), "domain_retrieved")


def test_the_models_page_of_an_unanswered_turn_shows_the_next_documents(
    make_turn: Callable[..., LookupTurn],
) -> None:
    """Nothing in the KB answers: the plan's lookup shows what clears the thresholds (here
    nothing); the model's own call, a page, shows the ranking's next documents."""
    turn = make_turn("en")
    question = "how do I bake sourdough bread at home"
    planned = turn.call({"query": question}, origin="plan")
    assert planned.executed and planned.level is None and planned.shown == []

    page = turn.call({"query": f"{question} details"})

    assert page.executed and page.level is RelevanceLevel.REFERENCE
    assert 1 < len(page.shown) <= 4  # 1 + reference_supplements
    again = turn.call({"query": f"more about {question}"})
    assert again.executed and not set(again.shown) & set(page.shown)


@pytest.mark.parametrize(
    ("question", "page"), [("Redis 慢查询怎么排查", True), ("Redis 连接池耗尽", False)]
)
def test_a_plan_finding_only_a_held_document_closes_its_domain_only_if_it_answers(
    make_turn: Callable[..., LookupTurn], question: str, page: bool
) -> None:
    """A second question's planned lookup ranks first the Redis runbook the first turn
    showed (DEDUPED). Asked again, the runbook answers: the domain closes and the model's
    repeat is blocked. Asked about slow queries, the runbook would only have been
    REFERENCE: the session holds no answer there, the model is told so, and its call
    naming the domain runs as the turn's page, as it would in a fresh session."""
    first = make_turn("zh")
    assert first.call({"query": "Redis 连接池耗尽"}, origin="plan").shown == [REDIS]
    turn = make_turn("zh", turn=2, session_id=first.session_id)

    planned = turn.call({"query": question, "domain": "infrastructure"}, origin="plan")

    assert planned.level is RelevanceLevel.DEDUPED and planned.details is not None
    held = planned.details.held_level
    assert held == "REFERENCE" if page else held in ("PRECISE", "HIGHLY_RELEVANT")
    assert planned.result is not None
    assert ("不能明确回答" in planned.result.message) is page
    again = turn.call({"query": f"{question} 步骤", "domain": "infrastructure"})
    if page:  # the domain holds nothing else: the page runs and finds nothing new
        assert again.executed and again.shown == []
    else:
        assert_blocked(again, "domain_retrieved")


def test_a_domain_the_model_names_is_not_widened(make_turn: Callable[..., LookupTurn]) -> None:
    named = make_turn("zh").call({"query": "Redis 连接池耗尽", "domain": "payment"})

    assert named.executed and named.details is not None and not named.details.widened
    assert REDIS not in named.shown and named.domain == "payment"


def test_a_good_planned_lookup_keeps_its_paraphrases(
    make_turn: Callable[..., LookupTurn],
) -> None:
    turn = make_turn("zh")
    planned = turn.call({"query": "Redis 连接池耗尽", "domain": "infrastructure"}, origin="plan")
    assert planned.level is RelevanceLevel.PRECISE

    paraphrase = turn.call({"query": "Redis 连接池耗尽的详细说明"})

    assert paraphrase.domain == "infrastructure"
    assert_blocked(paraphrase, "domain_retrieved")


def test_a_blocked_calls_inferred_domain_serves_its_paraphrases(
    make_turn: Callable[..., LookupTurn], lookup: GovernedLookup, monkeypatch: pytest.MonkeyPatch
) -> None:
    inferred: list[str] = []
    original = lookup.infer_domain

    def infer(query: str, reader: Reader | None = None) -> str | None:
        inferred.append(query)
        return original(query, reader)

    monkeypatch.setattr(lookup, "infer_domain", infer)
    turn = make_turn("zh")
    assert turn.call({"query": "Redis 连接池耗尽", "domain": "infrastructure"}).executed

    first = turn.call({"query": "maxTotal 配置 慢查询"})
    again = turn.call({"query": "maxTotal 配置 慢查询 的排查步骤"})

    assert inferred == ["maxTotal 配置 慢查询"]  # one inference; the paraphrase is remembered
    assert_blocked(first, "domain_retrieved")
    assert_blocked(again, "domain_retrieved")
    assert again.domain == first.domain == "infrastructure"


def test_a_paraphrase_follows_the_domain_the_earlier_call_named(
    make_turn: Callable[..., LookupTurn],
) -> None:
    turn = make_turn("zh")
    first = turn.call({"query": "Redis 连接池耗尽", "domain": "api"})
    assert first.executed and first.domain == "api"
    assert first.level in (None, RelevanceLevel.REFERENCE)  # nothing good in api

    paraphrase = turn.call({"query": "Redis 连接池耗尽 排查步骤"})

    # The KB would infer infrastructure; the paraphrase belongs to the earlier api call.
    assert paraphrase.domain == "api"
    assert_blocked(paraphrase, "supplement_needs_dimension")


def test_blocked_results_list_the_domains_retrieved_earlier_in_the_session(
    lookup: GovernedLookup, recorder: InvocationRepository
) -> None:
    session = f"tool-{uuid.uuid4().hex[:8]}"
    settings = GovernanceConfig(mode="domain-limit")
    first = LookupTurn(lookup, settings, session_id=session, turn=1, language="en")
    assert first.call({"query": "支付失败排查"}).executed

    second = LookupTurn(
        lookup, settings, session_id=session, turn=2, language="en", recorder=recorder
    )
    blocked = second.call({"query": "refund failed", "domain": "payment"})

    assert_blocked(blocked, "domain_retrieved")  # plan B: one lookup per domain per session
    assert blocked.result.retrieved_domains_this_session == ["payment"]
    assert "Domain payment was already retrieved" in blocked.result.message
    [row] = recorder.for_session(session)
    assert row.turn == 2 and not row.executed


# -- defects found by these tests, now fixed -------------------------------------------------


def test_a_blank_domain_counts_as_no_domain(make_turn: Callable[..., LookupTurn]) -> None:
    turn = make_turn("zh")
    outcome = turn.call({"query": "Redis 连接池耗尽", "domain": "   "})
    assert outcome.error is None and outcome.executed
    assert outcome.domain == "infrastructure"
    assert outcome.level is RelevanceLevel.PRECISE


def test_a_call_at_high_water_is_blocked_without_inferring_its_domain(
    make_turn: Callable[..., LookupTurn], searches: Counter[str]
) -> None:
    turn = make_turn("en", low_max_calls=0, high_min_calls=1)
    assert turn.call({"query": "支付失败排查"}).executed
    searches.clear()

    blocked = turn.call({"query": "how do I rotate the TLS certificate"})  # no domain named

    assert_blocked(blocked, "budget_exhausted")
    assert sum(searches.values()) == 0


def test_a_long_unknown_tool_name_is_recorded(
    request: pytest.FixtureRequest,
    database_url: str,
    make_turn: Callable[..., LookupTurn],
    recorder: InvocationRepository,
) -> None:
    turn = make_turn("en")
    name = "lookup_knowledge_in_the_operations_knowledge_base_with_extra_context_v2"
    assert len(name) > 64

    outcome = turn.call({"query": "支付失败"}, tool_name=name)

    assert outcome.error is not None and "unknown tool" in outcome.error
    [row] = rows(recorder, turn)
    assert row.verdict == "error"


def test_calls_without_a_retrieval_store_sql_null_details(
    make_turn: Callable[..., LookupTurn], engine: Engine
) -> None:
    turn = make_turn("zh")
    assert turn.call({"query": "支付失败排查"}).executed
    turn.call({"query": "退款失败", "domain": "payment"})  # blocked
    turn.call({"query": ""})  # malformed

    statement = text(
        "SELECT count(*) FROM tool_invocation "
        "WHERE session_id = :session AND retrieval_details IS NULL"
    )
    with engine.connect() as connection:
        nulls = connection.execute(statement, {"session": turn.session_id}).scalar_one()

    assert nulls == 2


#: arguments past their bounds or with control characters: (arguments, error)
UNBOUNDED: list[tuple[dict[str, Any], str]] = [
    ({"query": "连接池" * 1334}, "'query' is 4002 characters long; it takes at most 4000"),
    (
        {"query": "支付失败", "domain": "p" * 129},
        "'domain' is 129 characters long; it takes at most 128",
    ),
    (
        {"query": "支付失败", "missing_dimension": "退款" * 251},
        "'missing_dimension' is 502 characters long; it takes at most 500",
    ),
    ({"query": "支付\x00失败"}, "'query' contains the control character U+0000"),
    (
        {"query": "支付失败", "domain": "pay\x1bment"},
        "'domain' contains the control character U+001B",
    ),
    (
        {"query": "支付失败", "missing_dimension": "退\x00款"},
        "'missing_dimension' contains the control character U+0000",
    ),
]


def test_every_argument_is_bounded_before_any_search(
    make_turn: Callable[..., LookupTurn],
    recorder: InvocationRepository,
    searches: Counter[str],
) -> None:
    """A 475,000-character query ran 24 s of search; NUL in arguments failed the record
    on PostgreSQL. Each is a malformed call, refused before any search and recorded (NUL
    removed) on both stores; a query of exactly the limit runs."""
    turn = make_turn("zh")

    for step, (arguments, error) in enumerate(UNBOUNDED, 1):
        outcome = turn.call(arguments, call_id=f"c{step}", step=step)

        assert outcome.malformed and not outcome.executed, error
        assert outcome.model_view() == {"error": error}

    assert sum(searches.values()) == 0 and turn.governor.calls == 0
    recorded = rows(recorder, turn)
    assert [row.error for row in recorded] == [error for _, error in UNBOUNDED]
    assert all(row.verdict == "error" for row in recorded)
    assert recorded[3].arguments == {"query": "支付失败"}  # stored without its NUL
    assert recorded[0].arguments == {"query": "连接池" * 1334}  # 8,000 characters at most: kept

    at_limit = turn.call({"query": ("Redis 连接池耗尽 " * 400)[:4000]})
    assert at_limit.executed and at_limit.error is None


def test_arguments_too_long_to_record_are_recorded_cut(
    make_turn: Callable[..., LookupTurn], recorder: InvocationRepository
) -> None:
    turn = make_turn("en")
    huge = "pool " * 95_000

    outcome = turn.call({"query": huge, "note": huge})

    assert outcome.error == "unknown arguments: note"
    [row] = rows(recorder, turn)
    assert row.arguments == outcome.arguments
    assert list(row.arguments) == ["_raw"]
    assert row.arguments["_raw"] == '{"query": "' + huge[: 500 - 11] + "…"
