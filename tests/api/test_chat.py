"""Chat, sessions, map, health, metrics and the page, through the ASGI app."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from fakes.openai_server import (
    FakeOpenAIServer,
    RecordedRequest,
    error_reply,
    slow_stream_reply,
)
from superbiz.agents.runtime import Runtime, open_runtime
from superbiz.api import create_app
from superbiz.config import LLMSettings
from superbiz.evaluation._service_server import LiveServer
from superbiz.exceptions import ConfigError, LLMUnavailableError, UnknownDomainError
from superbiz.llm import OpenAIChatModel

PAYMENT = "payment/支付失败排查.md"
RATE_LIMIT = "api/rate-limit.md"
PAYMENT_QUESTION = "支付回调超时怎么办？"
RATE_QUESTION = "Clients receive HTTP 429 Too Many Requests, how do we raise the limit?"


def sid() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


def test_chat_answers_with_citations_plan_and_lookups(client: TestClient) -> None:
    session = sid()
    response = client.post("/api/chat", json={"session_id": session, "question": PAYMENT_QUESTION})
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["session_id"] == session and data["turn"] == 1
    assert data["model"] == "extractive" and data["extractive"] is True
    assert "抽取式回答" in data["answer"]
    assert PAYMENT in [c["path"] for c in data["citations"]]
    assert data["plan"]["need_retrieval"] is True
    assert "payment" in [d["domain"] for d in data["plan"]["domains"]]
    first = data["lookups"][0]
    assert first["executed"] is True and first["domain"] == "payment"
    assert first["relevance_level"] in ("PRECISE", "HIGHLY_RELEVANT", "REFERENCE")
    assert {"dedup_reason", "verdict", "water_level", "latency_ms"} <= first.keys()


def test_original_request_shape_is_accepted(client: TestClient) -> None:
    session = sid()
    response = client.post("/api/chat", json={"Id": session, "Question": RATE_QUESTION})
    assert response.status_code == 200, response.text
    assert response.json()["session_id"] == session
    assert RATE_LIMIT in [c["path"] for c in response.json()["citations"]]
    numeric = client.post("/api/chat", json={"Id": 424242, "Question": "你好"})
    assert numeric.status_code == 200 and numeric.json()["session_id"] == "424242"


def test_a_session_id_is_made_when_left_out(client: TestClient) -> None:
    response = client.post("/api/chat", json={"question": RATE_QUESTION})
    assert response.status_code == 200
    assert response.json()["session_id"].startswith("web-")


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"json": {}}, "question: Field required"),
        ({"json": {"session_id": "a"}}, "question: Field required"),
        ({"json": {"question": 123}}, "question: Input should be a valid string"),
        ({"json": {"question": "   "}}, "question: String should have at least 1 character"),
        ({"json": {"question": "ok", "session_id": ["a"]}}, "session_id"),
        ({"json": {"question": "ok", "session_id": "a/b"}}, "session_id"),
        ({"json": {"question": "x" * 4001}}, "at most 4000 characters"),
        ({"json": [1, 2]}, "body"),
        ({"content": b"", "headers": {"Content-Type": "application/json"}}, "Field required"),
        ({"content": b"{nope", "headers": {"Content-Type": "application/json"}}, "JSON"),
    ],
)
@pytest.mark.parametrize("path", ["/api/chat", "/api/chat_stream"])
def test_bad_requests_get_422_with_a_message(
    client: TestClient, path: str, kwargs: dict[str, Any], expected: str
) -> None:
    response = client.post(path, **kwargs)
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["error"] == "invalid_request"
    assert expected in body["message"]
    assert "Traceback" not in response.text


def test_stream_sends_plan_lookups_tokens_answer_done_in_order(
    client: TestClient, sse_events: Any
) -> None:
    session = sid()
    response = client.post(
        "/api/chat_stream", json={"session_id": session, "question": PAYMENT_QUESTION}
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = sse_events(response.text)
    names = [name for name, _, _ in events]
    assert names[0] == "plan" and names[-1] == "done" and names[-2] == "answer"
    assert [n for _, _, n in events] == list(range(1, len(events) + 1))
    assert {data["session_id"] for _, data, _ in events} == {session}
    assert "error" not in names

    # every tool_result follows its own tool_call; all lookups come before the answer text
    calls = [data["call_id"] for name, data, _ in events if name == "tool_call"]
    results = [data for name, data, _ in events if name == "tool_result"]
    assert calls and [r["call_id"] for r in results] == calls
    position = {(n, d.get("call_id")): i for i, (n, d, _) in enumerate(events)}
    for call_id in calls:
        assert position[("tool_call", call_id)] < position[("tool_result", call_id)]
    last_lookup = max(i for i, (n, _, _) in enumerate(events) if n == "tool_result")
    first_token = min(i for i, (n, _, _) in enumerate(events) if n == "token")
    assert last_lookup < first_token

    first = results[0]
    # the plan's lookup, run by code before the model's first step, streams like any other
    assert first["origin"] == "plan"
    [planned_call] = [d for n, d, _ in events if n == "tool_call" and d["call_id"] == calls[0]]
    # the small KB's map cannot measure a margin: the plan's lookup searches the whole KB
    assert planned_call["step"] == 0 and "domain" not in planned_call["arguments"]
    assert first["domain"] == "payment" and first["executed"] is True
    assert first["relevance_level"] in ("PRECISE", "HIGHLY_RELEVANT", "REFERENCE")
    assert first["completeness_hint"]
    assert "payment" in first["retrieved_domains"]
    assert first["verdict"] in ("continue", "supplement", "answer", "stop")
    assert first["water_level"] == "low"
    assert first["calls"] == 1 and first["high_mark"] == 8
    assert "dedup_reason" in first and first["primary"]["path"] == PAYMENT

    answer = next(data for name, data, _ in events if name == "answer")
    tokens = "".join(data["text"] for name, data, _ in events if name == "token")
    assert tokens == answer["answer"]
    assert PAYMENT in [c["path"] for c in answer["citations"]]
    assert len(answer["lookups"]) == len(results)
    assert answer["grounded"] is True and answer["invalid_citations"] == 0
    assert answer["usage"] == {"prompt_tokens": 0, "completion_tokens": 0}  # extractive

    # the turn is stored like any other
    stored = client.get(f"/api/sessions/{session}").json()["messages"]
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert stored[1]["content"] == answer["answer"]


def test_a_failing_turn_streams_error_then_done(
    client: TestClient,
    chat_assistant: Runtime,
    monkeypatch: pytest.MonkeyPatch,
    sse_events: Any,
) -> None:
    def unavailable(*args: Any, **kwargs: Any) -> Any:
        raise LLMUnavailableError("LLM endpoint http://llm is unreachable")

    monkeypatch.setattr(chat_assistant, "ask", unavailable)
    session = sid()
    response = client.post("/api/chat_stream", json={"session_id": session, "question": "hi"})
    events = sse_events(response.text)
    assert [name for name, _, _ in events] == ["error", "done"]
    error = events[0][1]
    assert error["status"] == 503 and error["error"] == "llm_unavailable"
    assert "unreachable" in error["message"] and error["session_id"] == session


@pytest.mark.parametrize(
    ("exc", "status", "kind"),
    [
        (LLMUnavailableError("LLM endpoint http://llm is unreachable"), 503, "llm_unavailable"),
        (UnknownDomainError("nope", ["api"]), 404, "unknown_domain"),
        (ConfigError("llm.model is set but llm.base-url is empty"), 500, "configuration_error"),
        (RuntimeError("boom"), 500, "internal_error"),
    ],
)
def test_errors_are_json_without_a_trace(
    client: TestClient,
    chat_assistant: Runtime,
    monkeypatch: pytest.MonkeyPatch,
    exc: Exception,
    status: int,
    kind: str,
) -> None:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise exc

    monkeypatch.setattr(chat_assistant, "ask", fail)
    response = client.post("/api/chat", json={"question": "hi"})
    assert response.status_code == status
    body = response.json()
    assert body["error"] == kind
    assert "Traceback" not in response.text and 'File "' not in response.text
    if kind == "internal_error":
        assert "boom" not in body["message"]
    else:
        assert str(exc) == body["message"]


def test_sessions_invocations_and_clear(client: TestClient) -> None:
    session = sid()
    assert client.get(f"/api/sessions/{session}").status_code == 404
    assert client.get(f"/api/sessions/{session}/invocations").status_code == 404
    client.post("/api/chat", json={"session_id": session, "question": PAYMENT_QUESTION})
    client.post("/api/chat", json={"session_id": session, "question": RATE_QUESTION})

    messages = client.get(f"/api/sessions/{session}").json()["messages"]
    assert [(m["turn"], m["role"]) for m in messages] == [
        (1, "user"),
        (1, "assistant"),
        (2, "user"),
        (2, "assistant"),
    ]
    assert messages[0]["content"] == PAYMENT_QUESTION
    assert all("content" not in c for m in messages for c in m["citations"])
    assert PAYMENT in [c["path"] for c in messages[1]["citations"]]

    calls = client.get(f"/api/sessions/{session}/invocations").json()["invocations"]
    assert [c["turn"] for c in calls][:1] == [1] and max(c["turn"] for c in calls) == 2
    assert calls[0]["domain"] == "payment" and calls[0]["executed"] is True
    assert calls[0]["origin"] == "plan"  # the planned lookup, run before the model's first step
    assert calls[0]["created_at"].endswith("+00:00")
    assert calls[0]["relevance_level"] and calls[0]["retrieval_details"]["l1_match_count"] >= 0

    cleared = client.post("/api/chat/clear", json={"session_id": session})
    assert cleared.status_code == 200 and cleared.json() == {"session_id": session, "cleared": True}
    assert client.get(f"/api/sessions/{session}").status_code == 404
    assert client.get(f"/api/sessions/{session}/invocations").status_code == 404
    assert client.post("/api/chat/clear", json={}).status_code == 422


def test_knowledge_map_json_and_yaml(client: TestClient) -> None:
    data = client.get("/api/knowledge/map").json()
    domains = {d["domain_id"]: d for d in data["available_knowledge_domains"]}
    assert set(domains) == {"api", "general", "infrastructure", "ops", "payment"}
    assert domains["payment"]["documents"][0]["path"] == PAYMENT
    assert "支付回调超时" in domains["payment"]["documents"][0]["covers"]
    yaml_text = client.get("/api/knowledge/map", params={"format": "yaml"})
    assert yaml_text.headers["content-type"].startswith("application/yaml")
    assert yaml_text.text.startswith("available_knowledge_domains:")
    assert "支付失败排查" in yaml_text.text
    assert client.get("/api/knowledge/map", params={"format": "xml"}).status_code == 422


def test_healthz_checks_both_stores(
    client: TestClient, chat_assistant: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    healthy = client.get("/healthz")
    assert healthy.status_code == 200
    assert healthy.json()["checks"] == {"database": "ok", "vector_store": "ok"}

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise OSError("database is locked")

    monkeypatch.setattr(chat_assistant.kb.engine, "connect", refuse)
    broken = client.get("/healthz")
    assert broken.status_code == 503
    assert broken.json()["problems"] == ["database: database is locked"]


def test_metrics_count_lookups_levels_and_latency(client: TestClient) -> None:
    client.post("/api/chat", json={"session_id": sid(), "question": PAYMENT_QUESTION})
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert 'superbiz_lookups_total{dedup_reason="none",outcome="executed"}' in text
    assert "superbiz_lookup_relevance_total{level=" in text
    assert "superbiz_lookup_latency_seconds_bucket" in text
    assert 'superbiz_turns_total{stopped_by="answer"}' in text
    assert (
        'superbiz_http_request_duration_seconds_count{method="POST",route="/api/chat",status="200"}'
        in text
    )


def test_page_docs_and_info(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert '<meta charset="utf-8">' in page.text and 'id="trace-heading"' in page.text
    for script in re.findall(r'<script src="([^"]+)"', page.text):
        assert client.get(script).status_code == 200, script
    assert client.get("/static/app.css").status_code == 200
    assert "检索治理" in client.get("/static/i18n.js").text  # the Chinese words
    assert client.get("/docs").status_code == 200
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/api/chat", "/api/chat_stream", "/api/documents", "/healthz"} <= set(paths)
    info = client.get("/api/info").json()
    assert info["extractive"] is True and info["high_mark"] == 8
    assert info["auth_required"] is False


def _drip_ended(answer: RecordedRequest) -> RecordedRequest:
    """``answer`` once the fake sent all of it or its client hung up (waiting at most a
    minute: the slow answer takes ~20 s in full)."""
    wait_until = time.monotonic() + 60
    while not (answer.abandoned or answer.sent_all) and time.monotonic() < wait_until:
        time.sleep(0.05)
    return answer


def test_a_client_that_closes_the_stream_cancels_the_turn_on_the_server(
    make_assistant: Callable[..., Runtime],
) -> None:
    """Stop on the page closes the stream: the server stops reading the model's reply,
    stores nothing for the turn, counts it as cancelled, and the session answers again."""
    with FakeOpenAIServer() as fake:
        # planner off, then an answer that takes ~20 s to drip out in full
        fake.script_chat(error_reply(400, "planner off"), slow_stream_reply(40, every_s=0.005))
        base = make_assistant()
        llm = LLMSettings(base_url=fake.base_url, model="fake-model", max_retries=0, timeout_s=60)
        settings = base.settings.model_copy(update={"llm": llm})
        runtime = open_runtime(settings, kb=base.kb, model=OpenAIChatModel(llm))
        session = sid()
        with (
            LiveServer(create_app(settings, assistant=runtime)) as server,
            httpx.Client(base_url=server.url, timeout=60) as http,
        ):
            body = {"session_id": session, "question": PAYMENT_QUESTION}
            with http.stream("POST", "/api/chat_stream", json=body) as stream:
                for line in stream.iter_lines():
                    if line == "event: token":
                        break  # the answer is streaming: the client goes away
            answer = _drip_ended(fake.recorded[-1])
            assert answer.abandoned and not answer.sent_all
            assert len(fake.chat_requests) == 2  # no model call after the disconnect

            fake.script_chat(error_reply(400, "planner off"), "第二个问题的回答。")
            second = http.post("/api/chat", json={**body, "question": "再问一次"})
            assert second.status_code == 200, second.text
            assert "第二个问题的回答" in second.json()["answer"]
            history = http.get(f"/api/sessions/{session}").json()["messages"]
            assert [(m["role"], m["content"]) for m in history] == [
                ("user", "再问一次"),
                ("assistant", second.json()["answer"]),
            ]
            metrics = http.get("/metrics").text
            assert 'superbiz_turns_total{stopped_by="cancelled"} 1.0' in metrics
            assert 'stopped_by="error"' not in metrics


def test_chat_cancel_stops_a_running_turn_whose_stream_stays_open(
    make_assistant: Callable[..., Runtime],
) -> None:
    """``POST /api/chat/cancel`` for a client that keeps reading: its stream ends with
    ``turn_cancelled`` and ``done``, and nothing of the turn is stored."""
    with FakeOpenAIServer() as fake:
        fake.script_chat(error_reply(400, "planner off"), slow_stream_reply(40, every_s=0.005))
        base = make_assistant()
        llm = LLMSettings(base_url=fake.base_url, model="fake-model", max_retries=0, timeout_s=60)
        settings = base.settings.model_copy(update={"llm": llm})
        runtime = open_runtime(settings, kb=base.kb, model=OpenAIChatModel(llm))
        session = sid()
        with (
            LiveServer(create_app(settings, assistant=runtime)) as server,
            httpx.Client(base_url=server.url, timeout=60) as http,
        ):
            assert http.post("/api/chat/cancel", json={"session_id": session}).json() == {
                "session_id": session,
                "cancelled": False,
            }
            body = {"session_id": session, "question": PAYMENT_QUESTION}
            events: list[str] = []
            with http.stream("POST", "/api/chat_stream", json=body) as stream:
                lines = stream.iter_lines()
                for line in lines:
                    if line == "event: token":
                        break
                cancelled = http.post("/api/chat/cancel", json={"session_id": session})
                assert cancelled.json() == {"session_id": session, "cancelled": True}
                events = [line for line in lines if line.startswith(("event:", "data:"))]
            names = [e.removeprefix("event: ") for e in events if e.startswith("event:")]
            assert names[-2:] == ["error", "done"]
            error = json.loads(events[events.index("event: error") + 1].removeprefix("data: "))
            assert error["error"] == "turn_cancelled" and error["status"] == 409
            answer = _drip_ended(fake.recorded[-1])
            assert answer.abandoned and not answer.sent_all
            assert http.get(f"/api/sessions/{session}").status_code == 404
