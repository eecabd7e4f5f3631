"""The Executor's governed ReAct loop on a real small KB.

The model is a ``ScriptedChatModel`` (pre-written replies, every step's messages and tools
recorded) or ``OpenAIChatModel`` talking to the strict fake OpenAI server. Retrieval is
real (USE + Milvus Lite); the record is real SQLite.
"""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from fakes.openai_server import (
    FakeOpenAIServer,
    length_reply,
    malformed_arguments_reply,
    text_reply,
    tool_call_reply,
)
from superbiz._messages import localized
from superbiz.agents.executor import Executor
from superbiz.agents.prompts import load_prompt
from superbiz.agents.turn_result import TurnResult
from superbiz.config import GovernanceConfig, LLMSettings
from superbiz.exceptions import LLMUnavailableError
from superbiz.governance.lookup import GovernedLookup
from superbiz.governance.results import ToolOutcome
from superbiz.governance.tracker import InMemorySessionTracker
from superbiz.governance.verdicts import Situation, breaker_message
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.llm.messages import AssistantMessage, SystemMessage, ToolMessage, Usage, UserMessage
from superbiz.llm.openai_compat import OpenAIChatModel
from superbiz.storage.invocations import InvocationRepository
from superbiz.testing import (
    ScriptedChatModel,
    answer,
    call,
    calls,
    lookup,
    malformed,
)

PAYMENT = "payment/支付失败排查.md"
REDIS = "infrastructure/redis-pool.md"
RATE_LIMIT = "api/rate-limit.md"
TOOL = ("lookup_knowledge",)


@pytest.fixture
def governed(governed_kb: KnowledgeBase) -> GovernedLookup:
    return GovernedLookup(governed_kb, InMemorySessionTracker())


@pytest.fixture
def recorder(governed_kb: KnowledgeBase) -> InvocationRepository:
    return InvocationRepository(governed_kb.engine)


@pytest.fixture
def session() -> str:
    return f"exec-{uuid.uuid4().hex[:8]}"


Run = Callable[..., TurnResult]


@pytest.fixture
def run(governed: GovernedLookup, recorder: InvocationRepository, session: str) -> Run:
    """``run(model, question, **governance)`` → one turn of the executor."""

    def run_turn(
        model: Any, question: str, *, on_lookup: Any = None, **governance: Any
    ) -> TurnResult:
        executor = Executor(model, governed, GovernanceConfig(**governance), recorder)
        return executor.run(session, question, turn=1, on_lookup=on_lookup)

    return run_turn


def cited(result: TurnResult) -> list[tuple[int, str, str, str]]:
    return [(c.ref, c.title, c.path, c.domain) for c in result.citations]


def system_count(messages: tuple[Any, ...]) -> int:
    return sum(isinstance(m, SystemMessage) for m in messages)


# -- the executor prompt ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "language", "marker"),
    [
        ("支付回调超时怎么办？", "zh", "用中文回答"),
        ("How do I raise the API limit?", "en", "in English"),
    ],
)
def test_executor_prompt_comes_first_and_has_no_knowledge_map(
    run: Run, question: str, language: str, marker: str
) -> None:
    model = ScriptedChatModel(answer("no lookup needed"))

    result = run(model, question)

    [step] = model.steps
    prompt = load_prompt("chat-executor-prompt", language)  # type: ignore[arg-type]
    assert step.messages == (SystemMessage(prompt), UserMessage(question))
    assert marker in prompt and "lookup_knowledge" in prompt
    everything = " ".join(getattr(m, "content", "") for m in step.messages)
    assert "available_knowledge_domains" not in everything
    for title in ("支付失败排查", "Redis 连接池耗尽", "API rate limiting", "Deployment checklist"):
        assert title not in everything
    assert step.tool_names == TOOL
    assert (result.answer, result.steps, result.stopped_by) == ("no lookup needed", 1, "answer")
    assert result.language == language and result.lookups == [] and result.citations == []


# -- the constraint between steps -----------------------------------------------------------


def test_the_constraint_is_injected_as_a_system_message_before_the_next_step(run: Run) -> None:
    model = ScriptedChatModel(
        lookup("支付失败排查", id="c1"),
        lookup("Redis 连接池耗尽", id="c2"),
        answer("先查网关日志 [1]，再检查 maxTotal [2]。"),
    )

    result = run(model, "支付回调超时，同时 Redis 连接池耗尽，怎么办？")

    first, second, third = model.steps
    assert system_count(first.messages) == 1  # a fresh turn needs no constraint
    assert isinstance(second.messages[-2], ToolMessage)
    assert second.messages[-1] == SystemMessage(
        breaker_message(Situation.ANSWER, "zh", closed_domains=("payment",), budget_left=7)
    )
    assert second.tool_names == TOOL  # another, not yet retrieved domain stays open
    # Only the current constraint is shown: earlier ones are not kept in the history.
    assert system_count(third.messages) == 2
    assert third.messages[-1] == SystemMessage(
        breaker_message(
            Situation.ANSWER, "zh", closed_domains=("payment", "infrastructure"), budget_left=6
        )
    )
    assert [o.executed for o in result.lookups] == [True, True]
    assert result.answer == "先查网关日志 [1]，再检查 maxTotal [2]。"


def test_on_stop_the_tool_is_withheld_and_calls_made_anyway_are_blocked_and_recorded(
    run: Run, recorder: InvocationRepository, session: str
) -> None:
    model = ScriptedChatModel(
        lookup("支付失败排查"),
        lookup("Redis 连接池耗尽"),
        lookup("API rate limiting", domain="api", id="late"),  # ignores the stop
        answer("Check the 网关日志 [1] and the maxTotal 配置 [2]."),
    )
    seen: list[ToolOutcome] = []

    result = run(
        model,
        "Payment callbacks time out and the Redis pool is exhausted: what now?",
        on_lookup=seen.append,
        low_max_calls=1,
        high_min_calls=2,
    )

    assert [s.tool_names for s in model.steps] == [TOOL, TOOL, (), ()]
    stop_message = breaker_message(
        Situation.HIGH_ANSWER, "en", closed_domains=("payment", "infrastructure"), budget_left=0
    )
    assert model.steps[2].messages[-1] == SystemMessage(stop_message)
    late = model.steps[3].tool_result("late")
    assert late["relevance_level"] == "DEDUPED" and late["dedup_reason"] == "budget_exhausted"
    assert late["primary"] is None and late["found"] is False
    assert (result.executed, result.blocked) == (2, 1)
    assert seen == result.lookups
    rows = recorder.for_session(session)
    assert [(r.executed, r.dedup_reason, r.verdict) for r in rows] == [
        (True, None, "answer"),
        (True, None, "stop"),
        (False, "budget_exhausted", "stop"),
    ]
    assert rows[2].step == 3 and rows[2].arguments == {
        "query": "API rate limiting",
        "domain": "api",
    }
    assert result.answer.startswith("Check the 网关日志")


def test_the_token_indicator_blocks_and_withholds_once_the_turn_is_expensive(run: Run) -> None:
    model = ScriptedChatModel(
        lookup("API quota", usage=Usage(prompt_tokens=3000, completion_tokens=500)),
        lookup("Redis 连接池耗尽", usage=Usage(prompt_tokens=8000, completion_tokens=1000)),
        answer("Ask the platform team [1]."),
    )

    result = run(model, "How do I raise my API quota?", indicator="tokens")

    # 3 500 tokens: low water; 12 500 ≥ high_min_tokens (12 000) after two calls only
    assert [s.tool_names for s in model.steps] == [TOOL, TOOL, ()]
    assert [(o.executed, o.dedup_reason) for o in result.lookups] == [
        (True, None),
        (False, "budget_exhausted"),
    ]
    assert "water level is high" in model.steps[2].messages[-1].content


# -- malformed calls from the model -----------------------------------------------------------


def test_malformed_tool_call_json_is_answered_as_a_tool_error_and_the_loop_goes_on(
    run: Run, recorder: InvocationRepository, session: str
) -> None:
    model = ScriptedChatModel(
        calls(malformed('{"query": "Redis 连接池', id="bad"), call("x", name="web_search", id="x")),
        lookup("Redis 连接池耗尽", id="good"),
        answer("检查 maxTotal 配置 [1]。"),
    )

    result = run(model, "Redis 连接池耗尽怎么办？")

    second = model.steps[1]
    error = second.tool_result("bad")
    assert set(error) == {"error"} and error["error"].startswith("arguments are not valid JSON")
    assert "unknown tool 'web_search'" in second.tool_result("x")["error"]
    assert second.tool_names == TOOL  # errors are not lookups: nothing was blocked
    assert system_count(second.messages) == 1  # and no constraint is due yet
    assert model.steps[2].tool_result("good")["relevance_level"] == "PRECISE"
    assert (result.executed, result.blocked, result.stopped_by) == (1, 0, "answer")
    assert [o.error is not None for o in result.lookups] == [True, True, False]
    assert [r.verdict for r in recorder.for_session(session)] == ["error", "error", "answer"]
    assert result.answer == "检查 maxTotal 配置 [1]。"


# -- the hard step cap ------------------------------------------------------------------------


def test_the_step_cap_ends_with_one_final_call_without_tools(run: Run) -> None:
    model = ScriptedChatModel(
        lookup("支付失败排查"),
        lookup("Redis 连接池耗尽"),
        answer("基于已有信息：先查网关日志 [1]，再查 maxTotal [2]。"),
    )

    result = run(model, "支付回调超时，Redis 连接池耗尽", max_steps=2)

    assert [s.tool_names for s in model.steps] == [TOOL, TOOL, ()]
    final = model.steps[2].messages[-1]
    assert isinstance(final, SystemMessage) and "最大步数" in final.content
    assert isinstance(model.steps[2].messages[-2], ToolMessage)
    assert (result.stopped_by, result.steps) == ("step_cap", 3)
    assert result.answer == "基于已有信息：先查网关日志 [1]，再查 maxTotal [2]。"
    assert result.executed == 2


def test_a_call_in_the_final_step_is_not_run_but_recorded(
    run: Run, recorder: InvocationRepository, session: str, governed_kb: KnowledgeBase
) -> None:
    model = ScriptedChatModel(
        lookup("Redis connection pool exhausted"),
        calls(call("API rate limiting", domain="api", id="late")),  # no text, just a call
        answer(""),  # the repair turn: still nothing
    )

    result = run(model, "The Redis connection pool is exhausted", max_steps=1)

    assert model.steps[1].tool_names == ()
    assert "step limit" in model.steps[1].messages[-1].content
    assert result.stopped_by == "step_cap"
    # an empty answer after a tool result: repaired once, then quoted from the document
    assert (result.answer_source, result.grounded, result.steps) == ("extractive", True, 3)
    assert result.answer.startswith("[Extractive answer] The model's answer")
    assert "Redis connection pool exhausted" in result.answer
    late = result.lookups[-1]
    assert not late.executed and late.error == "the step limit is reached"
    assert result.executed == 1
    rows = recorder.for_session(session)
    assert [(r.executed, r.verdict, r.step) for r in rows] == [
        (True, "answer", 1),
        (False, "error", 2),
    ]


# -- citations ----------------------------------------------------------------------------------


def test_documents_in_tool_results_are_numbered_and_become_the_citations(run: Run) -> None:
    model = ScriptedChatModel(
        lookup("支付失败排查", id="a"),
        lookup("Redis 连接池耗尽", id="b"),
        answer("网关日志 [1]；maxTotal [2]。"),
    )

    result = run(model, "支付回调超时，Redis 连接池耗尽")

    assert model.steps[1].tool_result("a")["primary"]["ref"] == 1
    assert model.steps[2].tool_result("b")["primary"]["ref"] == 2
    assert cited(result) == [
        (1, "支付失败排查", PAYMENT, "payment"),
        (2, "Redis 连接池耗尽", REDIS, "infrastructure"),
    ]
    assert result.evidence == [PAYMENT, REDIS]
    assert result.extractive is False
    assert [lookup.shown for lookup in result.lookups] == [[PAYMENT], [REDIS]]


def test_supplementary_documents_are_numbered_after_the_primary(run: Run) -> None:
    model = ScriptedChatModel(
        lookup("redis slow query and API 429", id="a"),
        answer("排查慢查询和未归还的连接 [1]；Too Many Requests [2]"),
    )

    result = run(model, "redis slow query and API 429")

    shown = model.steps[1].tool_result("a")
    documents = [shown["primary"], *shown["supplement"]]
    assert len(documents) >= 2  # precondition: this query brings a supplement
    assert [d["ref"] for d in documents] == list(range(1, len(documents) + 1))
    assert [c.path for c in result.citations] == [d["path"] for d in documents]
    assert [c.ref for c in result.citations] == list(range(1, len(documents) + 1))


# -- governance off ---------------------------------------------------------------------------


def test_with_governance_off_everything_is_admitted(
    run: Run, recorder: InvocationRepository, session: str
) -> None:
    model = ScriptedChatModel(
        lookup("支付失败排查"),
        lookup("支付失败排查 步骤"),
        lookup("退款失败", domain="payment"),
        lookup("退款失败", domain="payment", missing_dimension=""),
        answer("退款失败通常是因为原交易已经关闭 [1]。"),
    )

    result = run(model, "支付失败怎么办", enabled=False, high_min_calls=2)

    assert [s.tool_names for s in model.steps] == [TOOL] * 5
    assert all(system_count(s.messages) == 1 for s in model.steps)  # no constraint at all
    assert (result.executed, result.blocked) == (4, 0)
    assert all(o.verdict.value == "continue" for o in result.lookups)
    assert [o.dedup_reason for o in result.lookups][1:] == ["doc_retrieved"] * 3
    assert all(o.executed for o in result.lookups)
    assert len(recorder.for_session(session)) == 4


def test_a_second_turn_finds_the_first_turns_document_already_retrieved(
    governed: GovernedLookup, recorder: InvocationRepository, session: str
) -> None:
    executor = Executor(
        ScriptedChatModel(
            lookup("支付失败排查"),
            answer("先检查网关日志 [1]。"),
            lookup("支付失败排查"),
            answer("再确认订单状态是否已经更新 [1]。"),
        ),
        governed,
        GovernanceConfig(),
        recorder,
    )

    first = executor.run(session, "支付失败排查", turn=1)
    second = executor.run(session, "支付失败排查", turn=2)

    assert [r.turn for r in recorder.for_session(session)] == [1, 2]  # each under its turn
    assert first.lookups[0].result is not None and first.lookups[0].result.found
    assert second.lookups[0].dedup_reason == "doc_retrieved"


# -- over the OpenAI protocol (strict fake server) --------------------------------------------


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


def openai_model(base_url: str, *, max_retries: int = 0) -> OpenAIChatModel:
    settings = LLMSettings(base_url=base_url, model="fake-model", max_retries=max_retries)
    return OpenAIChatModel(settings, sleep=lambda _seconds: None)


def test_a_full_turn_over_the_openai_protocol(run: Run, server: FakeOpenAIServer) -> None:
    server.script_chat(
        tool_call_reply(("lookup_knowledge", '{"query": "支付失败排查"}'), ids=["call_a"]),
        text_reply("先检查网关日志 [1]。"),
    )

    with openai_model(server.base_url) as model:
        result = run(model, "支付回调超时怎么办？")

    assert result.answer == "先检查网关日志 [1]。"
    assert result.model == "fake-model" and result.executed == 1
    assert cited(result) == [(1, "支付失败排查", PAYMENT, "payment")]
    first, second = server.chat_requests
    assert first["messages"] == [
        {"role": "system", "content": load_prompt("chat-executor-prompt", "zh")},
        {"role": "user", "content": "支付回调超时怎么办？"},
    ]
    assert [t["function"]["name"] for t in first["tools"]] == ["lookup_knowledge"]
    sent = second["messages"]
    assert sent[2] == {
        "role": "assistant",
        "content": "",  # never null next to tool_calls
        "tool_calls": [
            {
                "id": "call_a",
                "type": "function",
                "function": {"name": "lookup_knowledge", "arguments": '{"query": "支付失败排查"}'},
            }
        ],
    }
    assert sent[3]["role"] == "tool" and sent[3]["tool_call_id"] == "call_a"
    assert sent[3]["name"] == "lookup_knowledge"
    tool_result = json.loads(sent[3]["content"])
    assert tool_result["relevance_level"] == "PRECISE"
    assert tool_result["primary"]["path"] == PAYMENT and tool_result["primary"]["ref"] == 1
    assert sent[4]["role"] == "system" and "检索结果已足够相关" in sent[4]["content"]
    assert len(sent) == 5
    assert server.pending_chat_replies == 0


def test_malformed_arguments_from_the_server_are_answered_as_a_tool_error(
    run: Run, server: FakeOpenAIServer
) -> None:
    server.script_chat(
        malformed_arguments_reply("lookup_knowledge", '{"query": "disk full'),
        text_reply("I could not look that up."),
    )

    with openai_model(server.base_url) as model:
        result = run(model, "The disk is full, what now?")

    assert result.answer == "I could not look that up."
    [outcome] = result.lookups
    assert not outcome.executed and outcome.error is not None
    sent = server.chat_requests[1]["messages"]
    assert sent[2]["content"] == "" and sent[2]["tool_calls"][0]["function"]["arguments"] == "{}"
    error = json.loads(sent[3]["content"])
    assert set(error) == {"error"} and "not valid JSON" in error["error"]
    assert sent[3]["tool_call_id"] == sent[2]["tool_calls"][0]["id"]
    assert "tools" in server.chat_requests[1]  # the tool is still offered


# -- answers cut at the model's token limit ---------------------------------------------------

CUT = "先检查网关日志 [1]，再"  # grounded in 支付失败排查, stopped mid-sentence


def test_an_answer_cut_at_the_token_limit_is_kept_and_marked_as_cut(
    run: Run, server: FakeOpenAIServer
) -> None:
    server.script_chat(
        tool_call_reply(("lookup_knowledge", '{"query": "支付失败排查"}')), length_reply(CUT)
    )

    with openai_model(server.base_url) as model:
        result = run(model, "支付回调超时怎么办？")

    assert (result.answer_source, result.grounded, result.truncated) == ("model", True, True)
    assert result.answer == CUT + localized("executor.length_cut", "zh")


def test_a_repaired_answer_cut_at_the_token_limit_is_marked_as_cut(
    run: Run, server: FakeOpenAIServer
) -> None:
    server.script_chat(
        tool_call_reply(("lookup_knowledge", '{"query": "Redis connection pool exhausted"}')),
        text_reply("Restart everything."),  # draws on nothing: repaired
        length_reply("检查 maxTotal 配置 [1]，再排查慢查询和"),
    )

    with openai_model(server.base_url) as model:
        result = run(model, "The Redis connection pool is exhausted")

    assert (result.answer_source, result.truncated) == ("repaired", True)
    assert result.answer.endswith(localized("executor.length_cut", "en"))


def test_an_extractive_answer_is_never_marked_as_cut(run: Run, server: FakeOpenAIServer) -> None:
    """The cut answer was replaced by a quote from the documents: that one is whole."""
    server.script_chat(
        tool_call_reply(("lookup_knowledge", '{"query": "支付失败排查"}')),
        length_reply("重启一下试试，或者"),
        length_reply("还是重启"),
    )

    with openai_model(server.base_url) as model:
        result = run(model, "支付回调超时怎么办？")

    assert (result.answer_source, result.truncated) == ("extractive", False)
    assert localized("executor.length_cut", "zh") not in result.answer


def test_the_raw_text_of_malformed_arguments_is_kept_in_the_record(
    run: Run, server: FakeOpenAIServer, recorder: InvocationRepository, session: str
) -> None:
    long_raw = '{"query": "' + "disk full " * 100
    server.script_chat(
        malformed_arguments_reply("lookup_knowledge", '{"query": "disk full'),
        malformed_arguments_reply("lookup_knowledge", long_raw),
        text_reply("I could not look that up."),
    )

    with openai_model(server.base_url) as model:
        result = run(model, "The disk is full, what now?")

    first, second = recorder.for_session(session)
    assert first.arguments == {"_raw": '{"query": "disk full'}
    assert second.arguments == {"_raw": long_raw[:500] + "…"}
    assert [o.arguments for o in result.lookups] == [first.arguments, second.arguments]
    assert first.error is not None and first.error.startswith("arguments are not valid JSON")
    # the model is still told what was wrong, and its history stays parseable
    sent = server.chat_requests[1]["messages"]
    assert "not valid JSON" in json.loads(sent[3]["content"])["error"]
    assert sent[2]["tool_calls"][0]["function"]["arguments"] == "{}"


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_dead_endpoint_raises_a_clear_unavailable_error(run: Run) -> None:
    base_url = f"http://127.0.0.1:{closed_port()}/v1"

    with openai_model(base_url, max_retries=1) as model, pytest.raises(LLMUnavailableError) as info:
        run(model, "The disk is full, what now?")

    message = str(info.value)
    assert base_url in message
    assert "unavailable after 2 attempts" in message
    assert "refused" in message.lower()


def test_the_assistant_message_with_calls_is_kept_in_the_history(run: Run) -> None:
    model = ScriptedChatModel(lookup("支付失败排查", id="c1"), answer("先检查网关日志 [1]。"))

    run(model, "支付失败排查")

    history = model.steps[1].messages
    assistant = [m for m in history if isinstance(m, AssistantMessage)]
    assert len(assistant) == 1 and assistant[0].tool_calls[0].id == "c1"
    assert history.index(assistant[0]) + 1 == history.index(model.steps[1].tool_results[0])


def test_an_answer_resting_on_pages_that_never_name_the_questions_subject_is_no_evidence(
    run: Run,
) -> None:
    """ "ZooKeeper 连接池耗尽…" finds the Redis pool runbook by its other words: a model's
    answer citing it is not grounded (the extractive answer quotes nothing there)."""
    model = ScriptedChatModel(
        lookup("ZooKeeper 连接池耗尽"),
        answer("检查 maxTotal 配置，排查慢查询和未归还的连接 [1]。"),
    )

    result = run(model, "ZooKeeper 连接池耗尽怎么办？")

    assert result.lookups[0].shown[:1] == ["infrastructure/redis-pool.md"]
    assert not result.grounded and result.answer_source == "no_evidence", result.answer
    assert result.citations == [] and "[1]" not in result.answer
