"""Model calls end by their deadlines, and every bad answer is one clear LLMError.

The fake server drips, hangs or sends garbage; without the deadlines each of these
calls would succeed (late) or raise something other than an ``LLMError``.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from fakes.openai_server import (
    FakeOpenAIServer,
    RawReply,
    drip_reply,
    error_reply,
    garbage_reply,
    hang_reply,
)
from superbiz.config import LLMSettings
from superbiz.exceptions import (
    LLMResponseError,
    LLMTimeoutError,
    LLMUnavailableError,
    TurnCancelledError,
)
from superbiz.llm import OpenAIChatModel, UserMessage
from superbiz.llm.base import StreamEvent, TextDelta
from superbiz.llm.deadline import cancellable, check, remaining, turn_deadline

QUESTION = [UserMessage("Disk is full, what now?")]


def model(server: FakeOpenAIServer, **settings: object) -> OpenAIChatModel:
    llm = LLMSettings(
        base_url=server.base_url, model="fake-model", **{"max_retries": 0, **settings}
    )
    return OpenAIChatModel(llm, sleep=lambda _: None)


def test_a_drip_cannot_extend_the_call(fake_openai: FakeOpenAIServer) -> None:
    """One byte every 50 ms keeps every read alive; the whole call still ends."""
    fake_openai.script_chat(drip_reply("x" * 200, every_s=0.05))
    with pytest.raises(LLMTimeoutError, match=r"llm\.timeout-s"):
        model(fake_openai, timeout_s=0.5).complete(QUESTION)


def test_a_drip_cannot_extend_a_stream(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script_chat(drip_reply("x" * 200, every_s=0.05))
    with pytest.raises(LLMTimeoutError):
        list(model(fake_openai, timeout_s=0.5).stream(QUESTION))


def test_a_hang_is_a_timeout_after_the_retries(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script_chat(hang_reply(3), hang_reply(3))
    with pytest.raises(LLMTimeoutError, match="after 2 attempts"):
        model(fake_openai, timeout_s=0.3, max_retries=1).complete(QUESTION)
    assert len(fake_openai.chat_requests) == 2


def test_the_turn_deadline_bounds_every_call_and_retry(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script_chat(*[drip_reply("x" * 200, every_s=0.05)] * 4)
    with turn_deadline(0.4):
        with pytest.raises(LLMTimeoutError):
            model(fake_openai, timeout_s=30, max_retries=3).complete(QUESTION)
        assert len(fake_openai.chat_requests) == 1  # no retry once the turn is over
        with pytest.raises(LLMTimeoutError, match=r"llm\.turn-timeout-s"):
            model(fake_openai).complete(QUESTION)
    assert remaining() is None
    check()  # outside a turn nothing is due


def test_an_outer_turn_deadline_wins() -> None:
    with turn_deadline(1), turn_deadline(100):
        left = remaining()
        assert left is not None and left <= 1


@pytest.mark.parametrize(
    "body",
    [b"<html>502 Bad Gateway</html>", b'{"choices": "nope"}', b"[1, 2]", b'{"choices": [{}]}'],
    ids=["not-json", "choices-string", "list", "choice-without-message"],
)
def test_garbage_is_a_response_error(fake_openai: FakeOpenAIServer, body: bytes) -> None:
    fake_openai.script_chat(garbage_reply(body))
    with pytest.raises(LLMResponseError, match="LLM endpoint"):
        model(fake_openai).complete(QUESTION)


def test_garbage_in_a_stream_is_a_response_error(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script_chat(
        garbage_reply(b"data: {not json}\n\n", content_type="text/event-stream")
    )
    with pytest.raises(LLMResponseError):
        list(model(fake_openai).stream(QUESTION))


def test_a_5xx_is_unavailable(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script_chat(error_reply(503, "overloaded"))
    with pytest.raises(LLMUnavailableError, match="overloaded"):
        model(fake_openai).complete(QUESTION)


def test_a_cancelled_turn_makes_no_model_call(fake_openai: FakeOpenAIServer) -> None:
    stop = threading.Event()
    stop.set()
    with cancellable(stop), pytest.raises(TurnCancelledError):
        model(fake_openai).complete(QUESTION)
    assert fake_openai.chat_requests == []
    check()  # outside the block the event no longer applies


def test_a_cancelled_turn_stops_reading_a_streamed_reply(fake_openai: FakeOpenAIServer) -> None:
    """The turn is stopped after the first text: the rest of the reply is never read
    (without the check the loop reads all 30 pieces, a few seconds of drip)."""
    base = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "fake-model"}
    pieces = [
        {**base, "choices": [{"index": 0, "delta": {"content": f"p{n} "}}]} for n in range(30)
    ]
    pieces.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    body = "".join(f"data: {json.dumps(p)}\n\n" for p in pieces) + "data: [DONE]\n\n"
    fake_openai.script_chat(RawReply(body.encode(), content_type="text/event-stream", drip_s=0.002))
    stop = threading.Event()
    seen: list[StreamEvent] = []
    with cancellable(stop), pytest.raises(TurnCancelledError):
        for event in model(fake_openai, timeout_s=60).stream(QUESTION):
            seen.append(event)
            stop.set()
    assert [type(e) for e in seen] == [TextDelta]
    answer = fake_openai.recorded[-1]
    wait_until = time.monotonic() + 60
    while not (answer.abandoned or answer.sent_all) and time.monotonic() < wait_until:
        time.sleep(0.05)
    assert answer.abandoned and not answer.sent_all
