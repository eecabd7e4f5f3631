"""The Supervisor through ``Runtime``: plan → executor → answer, multi-turn sessions.

One small KB per database (SQLite and PostgreSQL), ingested once for the module; every
test uses its own session ids. Without an LLM the Runtime is extractive (MapPlanner +
extractive model); with a model, a spy routes the planner's calls to scripted plans and
the executor's to the extractive player (or a ``ScriptedChatModel`` plays both), so the
messages each agent saw can be inspected.
"""

from __future__ import annotations

import json
import uuid
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from conftest import POSTGRES_URL, _libpq_url, _require_postgres, _with_query, write_kb
from superbiz.agents.context import EVIDENCE_HEADER, PLAN_HEADER
from superbiz.agents.extractive import ExtractiveChatModel
from superbiz.agents.planner import MapPlanner, Plan
from superbiz.agents.prompts import load_prompt
from superbiz.agents.runtime import Runtime, open_runtime
from superbiz.agents.supervisor import SupervisedTurn
from superbiz.config import Settings
from superbiz.governance.results import ToolOutcome
from superbiz.knowledge.coverage.domains import DomainService
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.llm.messages import (
    AssistantMessage,
    ChatResponse,
    Message,
    SystemMessage,
    ToolSpec,
    UserMessage,
)
from superbiz.retrieval.embedders import Embedder
from superbiz.retrieval.relevance import RelevanceLevel
from superbiz.testing import ScriptedChatModel, answer, lookup

PAYMENT = "payment/支付失败排查.md"
REDIS = "infrastructure/redis-pool.md"
RATE_LIMIT = "api/rate-limit.md"
PAY_Q = "支付回调超时怎么办？"
REFUND_Q = "退款失败通常是什么原因？"
MAP_MARKERS = ("available_knowledge_domains", "when_to_retrieve", "api: API rate limiting")
PLANNER_PREFIXES = tuple(
    load_prompt("chat-planner-prompt", lang).split("{knowledge_map}")[0]  # type: ignore[arg-type]
    for lang in ("zh", "en")
)


@contextmanager
def module_database(kind: str, root: Path) -> Iterator[str]:
    """A fresh database for the module: a SQLite file, or a PostgreSQL schema ``t_<uuid>``
    dropped afterwards (skipped when PostgreSQL is not reachable), like ``database_url``."""
    if kind == "sqlite":
        yield f"sqlite:///{root / 'superbiz.db'}"
        return
    import psycopg

    base = _require_postgres()
    schema = f"t_{uuid.uuid4().hex}"
    with psycopg.connect(_libpq_url(base), autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield _with_query(base, options=f"-csearch_path%3D{schema}", application_name=schema)
    finally:
        with psycopg.connect(_libpq_url(POSTGRES_URL), autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s AND pid <> pg_backend_pid()",
                (schema,),
            )
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def supervised_kb(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    use_embedder: Embedder,
) -> Iterator[KnowledgeBase]:
    root = tmp_path_factory.mktemp(f"supervisor-{request.param}")
    with module_database(request.param, root) as url:
        settings = Settings(data_dir=root / "data", database_url=url)
        kb = KnowledgeBase(settings, embedder=use_embedder)
        try:
            Ingestor(kb, domains=DomainService(kb)).ingest([write_kb(root / "kb")])
            yield kb
        finally:
            kb.close()


@pytest.fixture
def session() -> str:
    return f"sup-{uuid.uuid4().hex[:8]}"


def assistant_for(kb: KnowledgeBase, model: Any = None) -> Runtime:
    """A runtime on the shared KB (never closed here: the module closes the KB)."""
    return open_runtime(kb.settings, kb=kb, model=model)


@pytest.fixture
def assistant(supervised_kb: KnowledgeBase) -> Runtime:
    return assistant_for(supervised_kb)


def is_planner(messages: Sequence[Message]) -> bool:
    first = messages[0] if messages else None
    return isinstance(first, SystemMessage) and first.content.startswith(PLANNER_PREFIXES)


def text_of(messages: Sequence[Message]) -> str:
    return "\n".join(m.content for m in messages)


class SpyModel:
    """Planner calls get the scripted plans, in order; executor calls are played by the
    extractive model. Every call is recorded as ``(role, messages, tools)``."""

    name = "spy"
    quotes_documents = True  # its answers are the extractive player's quotes

    def __init__(self, *plans: dict[str, Any]) -> None:
        self.plans = deque(json.dumps(p, ensure_ascii=False) for p in plans)
        self.calls: list[tuple[str, tuple[Message, ...], tuple[ToolSpec, ...]]] = []
        self.player = ExtractiveChatModel()

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> Any:
        role = "planner" if is_planner(messages) else "executor"
        assert not messages[0].content.startswith("You summarise one domain"), "domain call"
        self.calls.append((role, tuple(messages), tuple(tools)))
        if role == "planner":
            return ChatResponse(AssistantMessage(self.plans.popleft()), None, "stop")
        return self.player.complete(messages, tools)

    def stream(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> Any:
        raise NotImplementedError

    def of(self, role: str) -> list[tuple[Message, ...]]:
        return [messages for r, messages, _ in self.calls if r == role]


SUB_QUESTIONS = {"payment": "支付回调超时怎么办", "infrastructure": "Redis 连接池耗尽"}


def plan(*domains: str, need: bool = True, direct: str | None = None) -> dict[str, Any]:
    return {
        "need_retrieval": need,
        "domains": [{"domain": d, "sub_question": SUB_QUESTIONS[d]} for d in domains],
        "direct_answer": direct,
    }


def invocation_turns(assistant: Runtime, session: str) -> list[int]:
    return [i.turn for i in assistant.invocations.for_session(session)]


# -- extractive mode: plan → executor → stored turn -----------------------------------------


def test_a_turn_plans_executes_and_is_stored(assistant: Runtime, session: str) -> None:
    plans: list[Plan] = []
    lookups: list[ToolOutcome] = []

    turn = assistant.ask(session, PAY_Q, on_plan=plans.append, on_lookup=lookups.append)

    assert isinstance(assistant.planner, MapPlanner)  # extractive mode plans from the map
    assert plans == [turn.plan] and turn.replan is None
    assert (turn.plan.source, turn.plan.domain_ids) == ("map", ["payment"])
    result = turn.result
    assert [(o.domain, o.executed, o.level.value if o.level else None) for o in lookups] == [
        ("payment", True, "PRECISE")
    ]
    assert result.lookups == lookups and result.turn == 1
    assert "支付渠道回调超时时" in result.answer and "[1]" in result.answer
    assert invocation_turns(assistant, session) == [1]

    user, reply = assistant.chats.messages(session)
    assert (user.role, user.turn, user.content, user.evidence, user.plan) == (
        "user",
        1,
        PAY_Q,
        [],
        None,
    )
    assert (reply.role, reply.turn, reply.content) == ("assistant", 1, result.answer)
    assert reply.plan == turn.plan.as_dict()
    [evidence] = reply.evidence
    assert (evidence["ref"], evidence["path"], evidence["domain"]) == (1, PAYMENT, "payment")
    assert evidence["title"] == "支付失败排查" and "支付渠道回调超时时" in evidence["content"]
    assert assistant.chats.exists(session)

    assert result.reused == []


@pytest.mark.parametrize(
    ("first", "follow_up", "document", "fact"),
    [
        (PAY_Q, REFUND_Q, PAYMENT, "商户余额不足"),
        (
            "How do I raise my API quota?",
            "What should I include when asking the platform team to raise the per-tenant quota?",
            RATE_LIMIT,
            "include the tenant id",
        ),
    ],
    ids=["zh", "en"],
)
def test_a_follow_up_is_answered_from_session_evidence_the_lookup_finds_held(
    assistant: Runtime, session: str, first: str, follow_up: str, document: str, fact: str
) -> None:
    one = assistant.ask(session, first)
    assert document in one.result.evidence and one.result.executed == 1

    two = assistant.ask(session, follow_up)

    assert two.plan.need_retrieval is False and two.plan.source == "evidence"
    # the plan is checked by the lookup a plain turn runs: it ranks the held document
    # above anything new, and shows nothing again
    [lookup] = two.result.lookups
    assert lookup.origin == "plan" and lookup.arguments == {"query": follow_up}
    assert lookup.details is not None and lookup.details.held_ahead[:1] == [document]
    assert document not in lookup.shown
    assert invocation_turns(assistant, session) == [1, 2]
    assert fact in two.result.answer
    assert two.result.turn == 2 and two.result.reused == [document]
    assert [c.path for c in two.result.citations] == [document]
    stored = assistant.chats.messages(session)
    assert [(m.turn, m.role) for m in stored] == [
        (1, "user"),
        (1, "assistant"),
        (2, "user"),
        (2, "assistant"),
    ]
    assert [e["path"] for e in stored[-1].evidence] == [document]
    # The same document is deduplicated for this session: a lookup would not show it again.
    assert document in assistant.tracker.retrieved_docs(session)


def test_a_new_topic_after_a_follow_up_retrieves_again(assistant: Runtime, session: str) -> None:
    assistant.ask(session, PAY_Q)
    assistant.ask(session, REFUND_Q)

    three = assistant.ask(session, "Redis 连接池耗尽怎么处理？")

    assert three.plan.source == "map" and three.plan.domain_ids == ["infrastructure"]
    assert three.result.executed == 1 and REDIS in three.result.evidence
    assert invocation_turns(assistant, session) == [1, 2, 3]


def test_a_plan_to_answer_from_evidence_never_finds_less_than_the_lookup(
    supervised_kb: KnowledgeBase, session: str
) -> None:
    # the planner says the session's evidence answers a question about something else
    # (as the map planner did on npm's docs when its best entry was a held page)
    spy = SpyModel(plan("payment"), plan(need=False))
    assistant = assistant_for(supervised_kb, spy)
    assistant.ask(session, PAY_Q)

    two = assistant.ask(session, "Redis 连接池耗尽怎么处理？")

    assert two.plan.need_retrieval is False
    [lookup] = two.result.lookups
    assert lookup.executed and REDIS in lookup.shown
    assert [c.path for c in two.result.citations][:1] == [REDIS]
    assert PAYMENT not in [c.path for c in two.result.citations]


def test_clearing_a_session_forgets_messages_action_memory_and_calls(
    assistant: Runtime, session: str
) -> None:
    assistant.ask(session, PAY_Q)
    assert assistant.tracker.retrieved_docs(session) == {PAYMENT: "payment"}

    assistant.clear_session(session)

    assert assistant.chats.messages(session) == [] and not assistant.chats.exists(session)
    assert assistant.chats.evidence(session) == []
    assert assistant.tracker.retrieved_docs(session) == {}
    assert assistant.invocations.for_session(session) == []

    again = assistant.ask(session, REFUND_Q)

    assert again.result.turn == 1
    assert again.plan.source == "map" and again.plan.domain_ids == ["payment"]
    [outcome] = again.result.lookups
    assert outcome.executed and outcome.dedup_reason is None
    assert outcome.level is not None and outcome.level.value != "DEDUPED"
    assert "商户余额不足" in again.result.answer
    assert invocation_turns(assistant, session) == [1]


def test_the_knowledge_map_is_built_once_until_invalidated(assistant: Runtime) -> None:
    first = assistant.knowledge_map()

    assert assistant.knowledge_map() is first
    assistant.invalidate_map()
    assert assistant.knowledge_map() is not first
    assert assistant.knowledge_map().domain_ids == first.domain_ids


# -- with an LLM: what each agent sees --------------------------------------------------------


def test_the_map_is_only_in_the_planner_prompt(supervised_kb: KnowledgeBase, session: str) -> None:
    spy = SpyModel(plan("payment"), plan(need=False))
    assistant = assistant_for(supervised_kb, spy)

    one = assistant.ask(session, PAY_Q)
    two = assistant.ask(session, REFUND_Q)

    planner_calls, executor_calls = spy.of("planner"), spy.of("executor")
    # the planned lookup runs before the executor's first step: one step per turn
    assert len(planner_calls) == 2 and len(executor_calls) == 2
    for messages in planner_calls:
        system = messages[0].content
        assert "available_knowledge_domains:" in system and "domain_id: payment" in system
    for messages in executor_calls:
        everything = text_of(messages)
        for marker in MAP_MARKERS:
            assert marker not in everything
        for domain in ("api", "general", "infrastructure", "ops"):
            assert f'"domain": "{domain}"' not in everything  # only the planned domain
    # The executor gets the plan (the planned domains), as a system message.
    plan_messages = [m for m in executor_calls[0] if m.content.startswith(PLAN_HEADER)]
    [plan_message] = plan_messages
    assert json.loads(plan_message.content[len(PLAN_HEADER) :]) == one.plan.as_dict()
    assert one.plan.source == "llm" and one.result.lookups[0].domain == "payment"
    assert one.result.lookups[0].origin == "plan"

    # Turn 2: the planner sees the session's documents; the executor gets them as evidence
    # and the earlier turn as history; the plan needs no retrieval, so the only lookup is
    # the question's own, run by code: it finds the document the session holds.
    assert "- 支付失败排查 [payment]" in planner_calls[1][0].content
    turn_two = executor_calls[-1]
    [evidence] = [m for m in turn_two if m.content.startswith(EVIDENCE_HEADER)]
    assert PAYMENT in evidence.content
    assert UserMessage(PAY_Q) in turn_two
    assert AssistantMessage(one.result.answer) in turn_two
    [lookup] = two.result.lookups
    assert lookup.origin == "plan" and lookup.level == RelevanceLevel.DEDUPED
    assert "商户余额不足" in two.result.answer and two.result.reused == [PAYMENT]
    assert invocation_turns(assistant, session) == [1, 2]


def test_a_direct_answer_skips_the_executor(supervised_kb: KnowledgeBase, session: str) -> None:
    spy = SpyModel(plan(need=False, direct="你好！我可以帮你查询运维知识。"))
    assistant = assistant_for(supervised_kb, spy)
    plans: list[Plan] = []

    turn = assistant.ask(session, "你好", on_plan=plans.append)

    assert [role for role, _, _ in spy.calls] == ["planner"]
    assert turn.result.answer == "你好！我可以帮你查询运维知识。"
    assert turn.result.lookups == [] and turn.result.steps == 0
    assert plans == [turn.plan] and turn.plan.direct_answer == turn.result.answer
    assert assistant.invocations.for_session(session) == []
    user, reply = assistant.chats.messages(session)
    assert (user.content, reply.content) == ("你好", turn.result.answer)
    assert reply.plan is not None and reply.plan["direct_answer"] == turn.result.answer
    assert reply.evidence == []

    # No tool call was recorded, yet the next turn is numbered 2 (from the chat store).
    spy.plans.append(json.dumps(plan(need=False, direct="再见！"), ensure_ascii=False))
    assert assistant.ask(session, "再见").result.turn == 2


# -- re-plan ---------------------------------------------------------------------------------

BOTH_Q = "支付回调超时，另外 Redis 连接池耗尽怎么办？"
GREETING, GREETING_ANSWER = "你好，我是支付组的值班。", "你好！请问遇到了什么问题？"
BOTH_ANSWER = "先检查网关日志 [1]，再检查 maxTotal 配置 [2]"


def replan_script(*before: str) -> ScriptedChatModel:
    """Plan payment (looked up by code); the executor asks for a missing dimension it
    cannot get (payment is closed); the re-plan says infrastructure (looked up by code);
    the second run is unfilled again. ``before``: replies of earlier turns."""
    return ScriptedChatModel(
        *before,
        json.dumps(plan("payment"), ensure_ascii=False),
        lookup("Redis 连接池耗尽", domain="payment", missing_dimension="Redis 连接池"),
        answer("支付渠道回调超时时，先检查网关日志 [1]"),
        json.dumps(plan("infrastructure"), ensure_ascii=False),
        lookup("Redis 连接池耗尽 Kafka", domain="infrastructure", missing_dimension="Kafka"),
        answer(BOTH_ANSWER),
    )


def run_replan(
    kb: KnowledgeBase, session: str, greeted: bool = False
) -> tuple[SupervisedTurn, ScriptedChatModel]:
    """The re-plan of a scoped plan (``advanced.planner.scope: always``; the small KB's map is
    too small to measure, and an unscoped plan's one lookup finds Redis itself);
    ``greeted``: after a turn of greeting (a direct answer) in the same session."""
    greeting = json.dumps(plan(need=False, direct=GREETING_ANSWER), ensure_ascii=False)
    model = replan_script(greeting) if greeted else replan_script()
    plans: list[Plan] = []
    advanced = kb.settings.advanced
    planner = advanced.planner.model_copy(update={"scope": "always"})
    settings = kb.settings.model_copy(
        update={"advanced": advanced.model_copy(update={"planner": planner})}
    )
    runtime = open_runtime(settings, kb=kb, model=model)
    if greeted:
        runtime.ask(session, GREETING)
    turn = runtime.ask(session, BOTH_Q, on_plan=plans.append)
    assert plans[-2:] == [turn.plan, turn.replan]
    return turn, model


def test_an_unfilled_dimension_replans_once_without_the_consulted_domains(
    supervised_kb: KnowledgeBase, session: str
) -> None:
    turn, model = run_replan(supervised_kb, session)

    assert model.pending == 0  # no third plan although the second run is unfilled too
    planner_steps = [s for s in model.steps if is_planner(s.messages)]
    assert len(planner_steps) == 2 and len(model.steps) == 6
    replan_question = planner_steps[1].messages[1].content
    assert replan_question.startswith(BOTH_Q)
    assert "已查询的域 payment；仍缺少的维度：Redis 连接池" in replan_question
    assert turn.plan.domain_ids == ["payment"]
    assert turn.replan is not None and turn.replan.domain_ids == ["infrastructure"]
    result = turn.result
    assert [(o.domain, o.executed, o.origin) for o in result.lookups] == [
        ("payment", True, "plan"),
        ("payment", False, "model"),
        ("infrastructure", True, "plan"),
        ("infrastructure", False, "model"),
    ]
    assert result.answer == BOTH_ANSWER and result.steps == 4 and result.grounded
    assert {REDIS, PAYMENT} <= set(result.evidence)
    assistant = assistant_for(supervised_kb)
    assert invocation_turns(assistant, session) == [1, 1, 1, 1]
    assert turn.plan.domain_ids[0] == "payment"
    assert turn.replan is not None and turn.replan.domain_ids[0] == "infrastructure"
    [_, stored] = assistant.chats.messages(session)
    assert stored.plan == turn.plan.as_dict() and stored.content == result.answer


def test_a_replan_shares_the_turn_budget(supervised_kb: KnowledgeBase, session: str) -> None:
    turn, _ = run_replan(supervised_kb, session)

    budgets = [o.constraint.budget_left for o in turn.result.lookups]
    # the nearer of 8 - calls and, in a planned turn, 3 - lookups that found documents:
    # the re-plan's lookups continue both counts
    assert budgets == [2, 2, 1, 1]
    governor = turn.result.governed.governor if turn.result.governed else None
    assert governor is not None and (governor.calls, governor.found) == (4, 2)


def test_documents_of_the_same_turn_are_not_reused_evidence(
    supervised_kb: KnowledgeBase, session: str
) -> None:
    turn, _ = run_replan(supervised_kb, session)

    assert turn.result.reused == []


def test_a_replan_runs_with_the_conversation(supervised_kb: KnowledgeBase, session: str) -> None:
    """The re-plan's run is the same turn of the same conversation: its model sees the
    turns before (it had seen none, and a follow-up's referent was lost with them)."""
    turn, model = run_replan(supervised_kb, session, greeted=True)

    assert turn.replan is not None
    [*_, last] = [s for s in model.steps if not is_planner(s.messages)]
    said = [m.content for m in last.messages if isinstance(m, (UserMessage, AssistantMessage))]
    assert said[:2] == [GREETING, GREETING_ANSWER], said


def test_no_replan_without_an_unfilled_dimension(
    supervised_kb: KnowledgeBase, session: str
) -> None:
    model = ScriptedChatModel(json.dumps(plan("payment")), answer("先检查网关日志 [1]"))

    turn = assistant_for(supervised_kb, model).ask(session, PAY_Q)

    assert model.pending == 0 and turn.replan is None
    assert sum(is_planner(s.messages) for s in model.steps) == 1
