"""The fourth live run of a small real model (``qwen2.5-coder-1.5b-live-turn4.jsonl``),
replayed, and the same questions asked with no model at all.

Qwen2.5-Coder-1.5B answered nine questions on the example KB (tests/data/llm-transcripts):
it wrote its second lookup as text in its template's shape (``functions.lookup_knowledge:``
and HTML-escaped JSON), which superbiz repaired as an answer; most first plans were
JavaScript object literals, each sent back for a repair round; the follow-up "重试几次之后
会放弃？" was answered from the chargeback FAQ, the refund guide and the reconciliation
runbook, not from the webhook runbook the session held; a sub-question copied from the
map made the ERROR 1290 answer quote the disk-full runbook; "Who won the 2018 World Cup?"
quoted the chargeback FAQ as grounded, with the model and without. The fake OpenAI
server answers every request with the recorded response that matches it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fakes.openai_server import FakeOpenAIServer
from fakes.real_transcripts import QWEN_LIVE_TURN4, replaying
from superbiz.agents.runtime import Runtime, open_runtime
from superbiz.agents.turn_result import TurnResult
from superbiz.knowledge.kb.base import KnowledgeBase

WEBHOOK = "商户说 webhook 一直没收到，我们这边要查什么？"
FOLLOW_UP = "重试几次之后会放弃？"
ERROR_1290 = "主库挂了以后应用一直报 ERROR 1290 read-only，怎么恢复？"
WORLD_CUP = "Who won the 2018 World Cup?"
#: questions whose first plan was a JavaScript object literal naming a domain the KB has
OBJECT_LITERAL_PLANS = (
    "Postgres 从库延迟越来越大，报表查询都变慢了，先看哪里？",
    "对账发现渠道金额和我们账上差了几笔，怎么处理？",
    "The load balancer marks all backends unhealthy right after a deploy. Why?",
    ERROR_1290,
)
WEBHOOK_RUNBOOK = "api/webhook-delivery-retries.md"
FAILOVER_RUNBOOK = "database/mysql-failover.md"
#: the text call of the first question, as its arguments read once written out
TEXT_CALL_QUERY = (
    "商户说 webhook 一直没收到，我们这边要查什么？\nWhen a merchant says they did not receive "
    "a payment or refund notification from us, asks how webhooks are delivered and retries."
)


@pytest.fixture
def replayed(example_kb: KnowledgeBase) -> Iterator[tuple[Runtime, FakeOpenAIServer]]:
    with replaying(example_kb, QWEN_LIVE_TURN4) as replay:
        yield replay


@pytest.fixture
def no_model(example_kb: KnowledgeBase) -> Runtime:
    return open_runtime(example_kb.settings, kb=example_kb)  # the default: no LLM


def _planner_requests(server: FakeOpenAIServer, since: int) -> list[dict[str, object]]:
    return [r for r in server.chat_requests[since:] if "tools" not in r and _is_plan(r)]


def _is_plan(request: dict[str, object]) -> bool:
    messages = request["messages"]
    assert isinstance(messages, list)
    return "Planner" in str(messages[0]["content"])


def test_the_text_call_is_governed_as_a_call(
    replayed: tuple[Runtime, FakeOpenAIServer],
) -> None:
    runtime, _ = replayed
    turn = runtime.ask("turn4-webhook", WEBHOOK).result

    text_calls = [o for o in turn.lookups if o.arguments.get("query") == TEXT_CALL_QUERY]
    assert text_calls and all(o.origin == "model" and o.error is None for o in text_calls)
    assert text_calls[0].executed  # run: the plan's lookup left the budget open
    assert all(o.executed or o.dedup_reason is not None for o in text_calls)  # or blocked
    assert "functions.lookup_knowledge" not in turn.answer and "&#34;" not in turn.answer


@pytest.mark.parametrize("question", OBJECT_LITERAL_PLANS)
def test_an_object_literal_plan_costs_no_repair_round(
    replayed: tuple[Runtime, FakeOpenAIServer], question: str
) -> None:
    runtime, server = replayed
    since = len(server.chat_requests)
    turn = runtime.ask(f"turn4-plan-{OBJECT_LITERAL_PLANS.index(question)}", question)

    assert turn.plan.source == "llm"  # read as it came, not "llm-repaired"
    assert len(_planner_requests(server, since)) == 1


def test_the_follow_up_answers_from_the_webhook_runbook_the_session_holds(
    replayed: tuple[Runtime, FakeOpenAIServer],
) -> None:
    runtime, _ = replayed
    runtime.ask("turn4-follow-up", WEBHOOK)
    turn = runtime.ask("turn4-follow-up", FOLLOW_UP).result

    _quotes_the_retry_schedule(turn)


def test_without_a_model_the_follow_up_answers_from_the_webhook_runbook(
    no_model: Runtime,
) -> None:
    no_model.ask("turn4-follow-up-extractive", WEBHOOK)
    turn = no_model.ask("turn4-follow-up-extractive", FOLLOW_UP).result

    _quotes_the_retry_schedule(turn)


def _quotes_the_retry_schedule(turn: TurnResult) -> None:
    assert [c.path for c in turn.citations][:1] == [WEBHOOK_RUNBOOK]
    assert turn.grounded and turn.reused == [WEBHOOK_RUNBOOK]  # re-quoted, not re-fetched
    first_quote = turn.answer.split("\n\n[", 2)[1].split("\n\n来源")[0]
    assert "Retry schedule" in first_quote and "EXHAUSTED" in first_quote
    assert "（本会话之前已检索到）" in first_quote  # says it was shown earlier
    assert "chargeback" not in first_quote.lower()


@pytest.mark.parametrize("with_model", [True, False])
def test_the_error_1290_answer_quotes_the_failover_runbook_first(
    replayed: tuple[Runtime, FakeOpenAIServer], no_model: Runtime, with_model: bool
) -> None:
    runtime = replayed[0] if with_model else no_model
    turn = runtime.ask(f"turn4-1290-{with_model}", ERROR_1290)

    # the planner's sub-question copied the map's disk-full sentence: it runs no lookup
    assert all("DiskPressure" not in o.arguments.get("query", "") for o in turn.result.lookups)
    assert turn.result.lookups[0].arguments["query"] == ERROR_1290
    assert turn.result.citations[0].path == FAILOVER_RUNBOOK
    assert turn.result.grounded


@pytest.mark.parametrize("with_model", [True, False])
def test_the_world_cup_is_answered_with_no_evidence_and_no_quote(
    replayed: tuple[Runtime, FakeOpenAIServer], no_model: Runtime, with_model: bool
) -> None:
    runtime = replayed[0] if with_model else no_model
    turn = runtime.ask(f"turn4-world-cup-{with_model}", WORLD_CUP).result

    assert turn.answer_source == "no_evidence" and not turn.grounded
    assert turn.citations == [] and turn.related == []
    assert "DISPUTE_CREDIT" not in turn.answer and "[1]" not in turn.answer


def test_the_world_cup_asked_after_the_webhook_question_is_still_no_evidence(
    no_model: Runtime,
) -> None:
    """A question that does not point back at the turn before it is not read with it:
    read so, the webhook runbook answered "the webhook question + Who won …?" and the
    World Cup was quoted the retry schedule, labelled grounded."""
    no_model.ask("turn4-world-cup-after-webhook", WEBHOOK)
    turn = no_model.ask("turn4-world-cup-after-webhook", WORLD_CUP).result

    assert turn.answer_source == "no_evidence" and not turn.grounded
    assert turn.citations == [] and "[1]" not in turn.answer


def test_a_sub_question_that_adds_to_the_question_is_a_lookup_of_its_own(
    replayed: tuple[Runtime, FakeOpenAIServer],
) -> None:
    """ "Postgres 从库延迟…" in its own words ranks the Hikari and Redis runbooks; the
    planner's "PostgreSQL replication lag" finds the replication-lag runbook HIGHLY_RELEVANT:
    both run, the user's words first, and the answer quotes what the better one found."""
    runtime, _ = replayed
    question = OBJECT_LITERAL_PLANS[0]
    turn = runtime.ask("turn4-postgres", question).result

    planned = [o.arguments["query"] for o in turn.lookups if o.origin == "plan"]
    assert planned == [question, "PostgreSQL replication lag"]
    assert turn.citations[0].path == "database/postgres-replication-lag.md"
