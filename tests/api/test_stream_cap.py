"""A streamed answer stops at ``chat.max-answer-chars``, like the stored one."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient

from superbiz.agents.runtime import Runtime, open_runtime
from superbiz.api import create_app
from superbiz.api.events import TokenStreamingModel
from superbiz.api.responses.chat import TokenEvent, TurnEvent
from superbiz.config import ChatSettings
from superbiz.llm.messages import UserMessage
from superbiz.testing import ScriptedChatModel, answer

GROUNDED = "支付渠道回调超时时，先检查网关日志 [1]。"
PLAN = json.dumps(
    {
        "need_retrieval": True,
        "domains": [{"domain": "payment", "sub_question": "支付回调超时怎么办"}],
        "direct_answer": None,
    }
)


def test_a_step_streams_at_most_max_chars_and_still_completes() -> None:
    sent: list[TurnEvent] = []
    streamer = TokenStreamingModel(
        ScriptedChatModel(answer("x" * 500), answer("short")), "s1", sent.append, max_chars=100
    )

    response = streamer.complete([UserMessage("q")])

    assert response.message.content == "x" * 500  # the executor still gets the whole text
    assert sum(len(e.text) for e in sent if isinstance(e, TokenEvent)) == 100
    assert streamer.cut and streamer.last_text == "x" * 500

    sent.clear()
    streamer.complete([UserMessage("q")])
    assert [e.text for e in sent if isinstance(e, TokenEvent)] == ["short"]
    assert not streamer.cut


def test_a_long_answer_streams_no_more_than_the_cap(
    make_assistant: Callable[..., Runtime], sse_events: Any
) -> None:
    ingested = make_assistant(chat=ChatSettings(max_answer_chars=1000))
    model = ScriptedChatModel(PLAN, answer(GROUNDED * 2000))
    assistant = open_runtime(ingested.settings, kb=ingested.kb, model=model)
    client = TestClient(create_app(assistant.settings, assistant=assistant, warm_up=False))

    question = {"session_id": "cap", "question": "支付回调超时"}
    response = client.post("/api/chat_stream", json=question)

    events = sse_events(response.text)
    tokens = "".join(data["text"] for name, data, _ in events if name == "token")
    final = next(data for name, data, _ in events if name == "answer")
    assert len(tokens) <= 1000 and tokens.startswith(GROUNDED)
    assert len(final["answer"]) <= 1000
    assert final["answer"].endswith("(chat.max-answer-chars)]")
