"""Every model failure is one clear HTTP error (502/503/504 with the reason), never a
hang, a traceback or a generic 500; the failed turn leaves its session as it was.

The model is a real ``OpenAIChatModel`` against the fake server, which drips, hangs,
fails or sends garbage. The planner falls back to the map when the model fails, so each
case scripts the same failure for the planner's call and the executor's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from fakes.openai_server import (
    FakeOpenAIServer,
    Reply,
    drip_reply,
    early_end_reply,
    error_reply,
    garbage_reply,
    hang_reply,
    length_reply,
    malformed_arguments_reply,
    no_choices_reply,
    text_reply,
)
from superbiz._messages import localized
from superbiz.agents.runtime import Runtime, open_runtime
from superbiz.api import create_app
from superbiz.config import LLMSettings
from superbiz.llm import OpenAIChatModel

FAILURES: dict[str, tuple[Reply, int, str]] = {
    "drip": (drip_reply("x" * 400, every_s=0.05), 504, "llm_timeout"),
    "hang": (hang_reply(4), 504, "llm_timeout"),
    "5xx": (error_reply(500, "upstream exploded"), 503, "llm_unavailable"),
    "not-json": (garbage_reply(), 502, "llm_error"),
    "wrong-shape": (garbage_reply(b'{"choices": [{"index": 0}]}'), 502, "llm_error"),
    "no-choices": (no_choices_reply(), 502, "llm_error"),
}
#: what only a stream can do; the first is the same reply as FAILURES' (same error)
STREAM_FAILURES: dict[str, tuple[Reply, int, str]] = {
    "no-choices": (no_choices_reply(), 502, "llm_error"),
    "ends-early": (early_end_reply("支付回调超时时，先查网关日志，再"), 503, "llm_unavailable"),
}


@pytest.fixture
def fake() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
def with_model(
    make_assistant: Callable[..., Runtime], fake: FakeOpenAIServer
) -> Callable[..., tuple[TestClient, Runtime]]:
    """``make(**assistant settings)`` → a client and runtime whose model is the fake."""

    def make(**overrides: Any) -> tuple[TestClient, Runtime]:
        base = make_assistant(**overrides)
        # 2 s: under a loaded CI machine the fake's quick 5xx took over 0.5 s to arrive and
        # read as a timeout; the drip (20 s) and the hang (4 s) still pass it
        llm = LLMSettings(base_url=fake.base_url, model="fake-model", max_retries=0, timeout_s=2.0)
        settings = base.settings.model_copy(update={"llm": llm})
        runtime = open_runtime(settings, kb=base.kb, model=OpenAIChatModel(llm))
        app = create_app(settings, assistant=runtime, warm_up=False)
        return TestClient(app, raise_server_exceptions=False), runtime

    return make


@pytest.mark.parametrize("case", FAILURES, ids=list(FAILURES))
def test_each_model_failure_is_one_clear_error(
    with_model: Callable[..., tuple[TestClient, Runtime]], fake: FakeOpenAIServer, case: str
) -> None:
    reply, status, kind = FAILURES[case]
    fake.script_chat(reply, reply)
    client, _ = with_model()

    response = client.post(
        "/api/chat", json={"session_id": "m1", "question": "支付回调超时怎么办？"}
    )

    assert response.status_code == status, response.text
    body = response.json()
    assert body["error"] == kind and "LLM endpoint" in body["message"]
    assert "Traceback" not in response.text
    assert "ChatCompletion(" not in body["message"]  # a reason, not the SDK's object


@pytest.mark.parametrize("case", STREAM_FAILURES, ids=list(STREAM_FAILURES))
def test_a_streamed_turn_fails_as_a_plain_turn_does(
    with_model: Callable[..., tuple[TestClient, Runtime]],
    fake: FakeOpenAIServer,
    sse_events: Callable[[str], list[tuple[str, dict[str, Any], int]]],
    case: str,
) -> None:
    """An empty reply is the plain turn's 502 in a stream too (it was a 200 with the
    extractive answer), and a stream that ends before the model finished is an error,
    not a half answer stored as a whole one."""
    reply, status, kind = STREAM_FAILURES[case]
    fake.script_chat(error_reply(400, "planner off"), reply)
    client, runtime = with_model()

    response = client.post("/api/chat_stream", json={"session_id": "m4", "question": "支付失败"})

    events = sse_events(response.text)
    names = [name for name, _, _ in events]
    error = next(data for name, data, _ in events if name == "error")
    assert (error["status"], error["error"]) == (status, kind)
    assert "LLM endpoint" in error["message"] and "\n" not in error["message"]
    assert "answer" not in names and names[-1] == "done"
    assert runtime.chats.messages("m4") == []  # nothing of the turn is stored


def test_a_streamed_turn_reports_the_timeout_as_an_event(
    with_model: Callable[..., tuple[TestClient, Runtime]],
    fake: FakeOpenAIServer,
    sse_events: Callable[[str], list[tuple[str, dict[str, Any], int]]],
) -> None:
    reply = drip_reply("x" * 400, every_s=0.05)
    fake.script_chat(reply, reply)
    client, _ = with_model()

    response = client.post("/api/chat_stream", json={"session_id": "m2", "question": "支付失败"})

    events = sse_events(response.text)
    error = next(data for name, data, _ in events if name == "error")
    assert (error["status"], error["error"]) == (504, "llm_timeout")
    assert events[-1][0] == "done"


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_a_turn_failing_after_its_first_lookup_can_be_asked_again(
    with_model: Callable[..., tuple[TestClient, Runtime]],
    fake: FakeOpenAIServer,
    database_factory: Callable[[str], str],
    database: str,
) -> None:
    client, runtime = with_model(database_url=database_factory(database))
    # the map plans (the planner's model is off) and its lookup runs; then the model fails
    fake.script_chat(error_reply(400, "planner off"), error_reply(500, "gone"))
    question = {"session_id": "m3", "question": "支付回调超时怎么办？"}

    assert client.post("/api/chat", json=question).status_code == 503
    assert runtime.tracker.retrieved_docs("m3") == {}

    grounded = "支付渠道回调超时时，先检查网关日志 [1]。"
    fake.script_chat(error_reply(400, "planner off"), text_reply(grounded))
    again = client.post("/api/chat", json=question)
    assert again.status_code == 200, again.text
    [looked_up] = again.json()["lookups"]
    assert looked_up["executed"] and looked_up["dedup_reason"] is None
    assert looked_up["origin"] == "plan" and again.json()["grounded"] is True
    assert again.json()["citations"][0]["path"] == "payment/支付失败排查.md"


@pytest.mark.parametrize("route", ["/api/chat", "/api/chat_stream"])
def test_an_answer_cut_at_the_token_limit_is_shown_and_stored_as_cut(
    with_model: Callable[..., tuple[TestClient, Runtime]],
    fake: FakeOpenAIServer,
    sse_events: Callable[[str], list[tuple[str, dict[str, Any], int]]],
    route: str,
) -> None:
    cut = "支付渠道回调超时时，先检查网关日志 [1]，再"
    fake.script_chat(error_reply(400, "planner off"), length_reply(cut))
    client, runtime = with_model()

    response = client.post(route, json={"session_id": "m5", "question": "支付回调超时怎么办？"})

    assert response.status_code == 200, response.text
    if route == "/api/chat":
        body = response.json()
    else:
        body = next(data for name, data, _ in sse_events(response.text) if name == "answer")
    shown = cut + localized("executor.length_cut", "zh")
    assert (body["answer"], body["truncated"], body["answer_source"]) == (shown, True, "model")
    assert runtime.chats.messages("m5")[-1].content == shown


@pytest.mark.parametrize("route", ["/api/chat", "/api/chat_stream"])
def test_a_model_that_keeps_sending_malformed_calls_is_stopped_after_three_steps(
    with_model: Callable[..., tuple[TestClient, Runtime]],
    fake: FakeOpenAIServer,
    sse_events: Callable[[str], list[tuple[str, dict[str, Any], int]]],
    route: str,
) -> None:
    """It used to get every one of ``governance.max-steps`` (10) steps, then the step
    cap's call and a repair turn: 12 executor calls for the extractive answer it gets
    after 5 now (3 steps, the call without the tool, the repair turn)."""
    bad = malformed_arguments_reply("lookup_knowledge", '{"query": "支付回调超时", ')
    fake.script_chat(error_reply(400, "planner off"), *[bad] * 14)
    client, runtime = with_model()

    response = client.post(route, json={"session_id": "m6", "question": "支付回调超时怎么办？"})

    assert response.status_code == 200, response.text
    raw = {"_raw": '{"query": "支付回调超时", '}
    if route == "/api/chat":
        body = response.json()
    else:
        events = sse_events(response.text)
        body = next(data for name, data, _ in events if name == "answer")
        announced = [data for name, data, _ in events if name == "tool_call"]
        assert announced[1:] and all(e["arguments"] == raw for e in announced[1:])
    assert (body["stopped_by"], body["answer_source"]) == ("malformed_calls", "extractive")
    assert body["steps"] == 5 and len(fake.chat_requests) == 6  # the planner's call too
    assert body["answer"].startswith(localized("extractive.fallback_label", "zh")[:6])
    forced = fake.chat_requests[4]
    assert "tools" not in forced
    assert forced["messages"][-1]["content"] == localized("executor.malformed_calls", "zh")
    lookups = body["lookups"]
    assert lookups[0]["origin"] == "plan" and lookups[0]["executed"]
    assert [lk["arguments"] for lk in lookups[1:]] == [raw] * 4
    rows = runtime.invocations.for_session("m6")
    assert [r.verdict for r in rows[1:]] == ["error"] * 4  # 3 steps + the forced call
