"""A turn's bounds: a failed turn leaves its session as it was, history sent back to
the model stays within its token budget, and an answer is capped; SQLite and PostgreSQL."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from conftest import write_kb
from superbiz.agents.runtime import Runtime, open_runtime
from superbiz.config import ChatSettings, Settings
from superbiz.exceptions import EmbeddingError, LLMTimeoutError, LLMUnavailableError
from superbiz.governance.results import ToolOutcome
from superbiz.knowledge.coverage.domains import DomainService
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.llm import deadline
from superbiz.llm.messages import Message, ToolSpec
from superbiz.retrieval.embedders import Embedder
from superbiz.testing import ScriptedChatModel, answer, call, calls, lookup

PAYMENT = "payment/支付失败排查.md"
PAY_Q = "支付回调超时怎么办？"
#: an answer drawn from the payment runbook (the plan's lookup runs before the first step)
GROUNDED = "支付渠道回调超时时，先检查网关日志 [1]。"
PLAN = json.dumps(
    {
        "need_retrieval": True,
        "domains": [{"domain": "payment", "sub_question": "支付回调超时怎么办"}],
        "direct_answer": None,
    }
)


@pytest.fixture
def runtime(
    tmp_path: Path, database_url: str, use_embedder: Embedder
) -> Iterator[Callable[..., Runtime]]:
    """``runtime(model, **settings)`` over the small KB in a fresh database."""
    opened: list[KnowledgeBase] = []

    def make(model: ScriptedChatModel, **overrides: Any) -> Runtime:
        settings = Settings(data_dir=tmp_path / "data", database_url=database_url, **overrides)
        kb = KnowledgeBase(settings, embedder=use_embedder)
        opened.append(kb)
        Ingestor(kb, domains=DomainService(kb)).ingest([write_kb(tmp_path / "kb")])
        return open_runtime(settings, kb=kb, model=model)

    yield make
    for kb in opened:
        kb.close()


def fail(_: Sequence[Message], __: Sequence[ToolSpec]) -> Any:
    raise LLMUnavailableError("LLM endpoint http://fake is unavailable after 1 attempt")


def test_a_turn_failing_after_its_lookup_leaves_the_session_as_it_was(
    runtime: Callable[..., Runtime],
) -> None:
    model = ScriptedChatModel(PLAN, fail)  # fails after the plan's lookup
    assistant = runtime(model)

    with pytest.raises(LLMUnavailableError):
        assistant.ask("s1", PAY_Q)

    assert assistant.tracker.retrieved_docs("s1") == {}  # not "marked but unusable"
    assert assistant.chats.messages("s1") == []

    model.add(PLAN, answer(GROUNDED))
    turn = assistant.ask("s1", PAY_Q)
    [outcome] = turn.result.lookups
    assert outcome.executed and outcome.dedup_reason is None
    assert turn.result.evidence == [PAYMENT]
    assert PAYMENT in assistant.tracker.retrieved_docs("s1")


def test_a_failed_turn_keeps_earlier_marks(runtime: Callable[..., Runtime]) -> None:
    model = ScriptedChatModel(PLAN, answer(GROUNDED))
    assistant = runtime(model)
    assistant.ask("s1", PAY_Q)
    before = assistant.tracker.retrieved_docs("s1")

    model.add(PLAN, lookup("退款失败"), fail)
    with pytest.raises(LLMUnavailableError):
        assistant.ask("s1", "退款失败通常是什么原因？")

    assert assistant.tracker.retrieved_docs("s1") == before
    assert [m.role for m in assistant.chats.messages("s1")] == ["user", "assistant"]


def test_a_persons_lookups_and_chat_turns_share_one_count(
    runtime: Callable[..., Runtime],
) -> None:
    """``superbiz lookup`` between two chat turns of one session gets a number of its own,
    and undoing a failed chat turn after it does not forget its record."""
    model = ScriptedChatModel(PLAN, answer(GROUNDED))
    assistant = runtime(model)
    assistant.ask("s1", PAY_Q)
    assert assistant.user_lookup("s1", "退款失败").executed

    model.add(PLAN, fail)  # fails after the plan's lookup: its record is undone
    with pytest.raises(LLMUnavailableError):
        assistant.ask("s1", "退款失败通常是什么原因？")
    model.add(PLAN, answer(GROUNDED))
    assistant.ask("s1", PAY_Q)

    recorded = [(r.turn, r.origin) for r in assistant.invocations.for_session("s1")]
    assert recorded == [(1, "plan"), (2, "user"), (3, "plan")]
    assert [m.turn for m in assistant.chats.messages("s1")] == [1, 1, 3, 3]


def test_a_lookup_during_a_chat_turn_waits_for_it(runtime: Callable[..., Runtime]) -> None:
    """A person's lookup while a chat turn of the session is still planning would take
    the turn's number, and the turn's undo would delete its record: it waits instead."""
    planning, go_on = threading.Event(), threading.Event()

    def slow_plan(_: Sequence[Message], __: Sequence[ToolSpec]) -> Any:
        planning.set()
        go_on.wait(10)
        return PLAN

    assistant = runtime(ScriptedChatModel(slow_plan, fail))  # fails after the plan's lookup
    errors: list[BaseException] = []

    def chat() -> None:
        try:
            assistant.ask("s1", PAY_Q)
        except LLMUnavailableError as exc:
            errors.append(exc)

    chat_turn = threading.Thread(target=chat)
    chat_turn.start()
    assert planning.wait(10)
    person = threading.Thread(target=assistant.user_lookup, args=("s1", "退款失败"))
    person.start()
    time.sleep(0.3)  # the lookup runs now unless it waits for the turn
    go_on.set()
    chat_turn.join(10)
    person.join(10)

    assert len(errors) == 1
    recorded = [(r.turn, r.origin) for r in assistant.invocations.for_session("s1")]
    assert recorded == [(1, "user")]


def test_a_failing_lookup_of_a_person_is_recorded(
    runtime: Callable[..., Runtime], monkeypatch: pytest.MonkeyPatch
) -> None:
    assistant = runtime(ScriptedChatModel())

    def embedder_down(*_: Any, **__: Any) -> Any:
        raise EmbeddingError("embedding endpoint http://tei is unavailable")

    monkeypatch.setattr(assistant.lookup, "lookup", embedder_down)
    outcome = assistant.user_lookup("s1", "退款失败")

    assert outcome.error == "lookup failed: embedding endpoint http://tei is unavailable"
    [row] = assistant.invocations.for_session("s1")
    assert (row.origin, row.verdict, row.executed) == ("user", "error", False)
    assert row.error == outcome.error


def test_history_sent_back_stays_within_its_budget(runtime: Callable[..., Runtime]) -> None:
    long_answer = GROUNDED * 1000
    short = "再确认订单状态是否已经更新 [1]。"
    model = ScriptedChatModel(
        PLAN, answer(long_answer), PLAN, answer(short), PLAN, answer(GROUNDED)
    )
    assistant = runtime(
        model, chat=ChatSettings(history_token_budget=500, max_answer_chars=100_000)
    )
    assistant.ask("s1", PAY_Q)
    assistant.ask("s1", "second question")
    assistant.ask("s1", "third question")

    last_executor_step = model.steps[-1].messages
    sent = "\n".join(m.content for m in last_executor_step)
    # the newest turn fits (its [1] named no document bearing on "second question")
    assert "second question" in sent and short.replace(" [1]", "") in sent
    assert long_answer not in sent and PAY_Q not in sent  # the oldest, too large, dropped


def test_history_counts_chat_turns_not_turn_numbers(runtime: Callable[..., Runtime]) -> None:
    """A person's lookups between two chat turns take turn numbers of the same count:
    the first chat turn is still sent back with the third (turns 1, 5 and 6)."""
    # three answers of their own: one repeating an earlier answer is a copy (repaired)
    answers = (GROUNDED, "再确认订单状态是否已经更新 [1]。", "检查网关日志后确认订单状态 [1]。")
    model = ScriptedChatModel(*[step for text in answers for step in (PLAN, answer(text))])
    assistant = runtime(model)
    assistant.ask("s1", PAY_Q)
    for query in ("退款失败", "对账差异", "支付渠道"):
        assistant.user_lookup("s1", query)
    assistant.ask("s1", "second question")
    assistant.ask("s1", "third question")

    assert [m.turn for m in assistant.chats.messages("s1")] == [1, 1, 5, 5, 6, 6]
    sent = [m.content for m in model.steps[-1].messages]
    assert PAY_Q in sent and "second question" in sent


def test_an_answer_is_capped_before_it_is_stored(runtime: Callable[..., Runtime]) -> None:
    model = ScriptedChatModel(PLAN, answer(GROUNDED * 2000))
    assistant = runtime(model, chat=ChatSettings(max_answer_chars=1000))

    turn = assistant.ask("s1", PAY_Q)

    assert len(turn.result.answer) <= 1000
    assert turn.result.answer.endswith("(chat.max-answer-chars)]")
    assert assistant.chats.messages("s1")[-1].content == turn.result.answer


def test_a_question_with_a_nul_is_stored_without_it(runtime: Callable[..., Runtime]) -> None:
    """PostgreSQL refuses NUL in text: the turn would fail after its lookups."""
    model = ScriptedChatModel(PLAN, answer(GROUNDED))
    assistant = runtime(model)

    turn = assistant.ask("s1", "支付回调\x00超时怎么办？\x1b")

    assert turn.result.evidence == [PAYMENT]
    assert assistant.chats.messages("s1")[0].content == "支付回调超时怎么办？"


def test_a_turns_deadline_holds_between_its_lookups(runtime: Callable[..., Runtime]) -> None:
    """The deadline was checked only in model calls: lookups went on past it (61 s of a
    20 s turn) and a model that needed no call after them answered late. Here the
    deadline passes during the first of two calls of a step (the test waits it out in
    ``on_lookup``); the second never runs and the turn ends as timed out, undone."""
    model = ScriptedChatModel(
        PLAN,
        calls(call("退款失败", domain="payment", id="a"), call("Redis 连接池", id="b")),
        answer(GROUNDED),
    )
    assistant = runtime(model, llm={"turn_timeout_s": 5})
    seen: list[str] = []

    def on_lookup(outcome: ToolOutcome) -> None:
        seen.append(outcome.call_id)
        if outcome.call_id == "a":
            while (deadline.remaining() or 0) > 0:
                time.sleep(0.05)

    with pytest.raises(LLMTimeoutError, match=r"deadline of 5 s \(llm.turn-timeout-s\)"):
        assistant.ask("late", PAY_Q, on_lookup=on_lookup)

    assert seen[-1] == "a"  # "b" never ran
    assert assistant.invocations.for_session("late") == []  # the failed turn is undone
    assert assistant.chats.messages("late") == []
