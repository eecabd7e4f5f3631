"""Answer feedback over HTTP (``POST /api/sessions/{id}/turns/{turn}/feedback``), the
knowledge-gaps report (``GET /api/gaps``) and their counters in ``/metrics``."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

from superbiz.agents.runtime import Runtime
from superbiz.api import create_app
from superbiz.api.schemas import MAX_COMMENT_CHARS
from superbiz.config import Settings

KEY = "feedback-key"


def new_session() -> str:
    return f"fb-{uuid.uuid4().hex}"


def answered(client: TestClient, question: str = "API rate limiting 429") -> tuple[str, int]:
    session = new_session()
    response = client.post("/api/chat", json={"session_id": session, "question": question})
    assert response.status_code == 200, response.text
    return session, response.json()["turn"]


def feedback_url(session: str, turn: int | str) -> str:
    return f"/api/sessions/{session}/turns/{turn}/feedback"


def test_a_rating_is_stored_replaced_shown_with_the_answer_and_counted(
    client: TestClient,
) -> None:
    session, turn = answered(client)
    first = client.post(feedback_url(session, turn), json={"rating": "up"})
    assert first.status_code == 200, first.text
    assert first.json() | {"updated_at": None} == {
        "session_id": session,
        "turn": turn,
        "rating": "up",
        "comment": None,
        "updated_at": None,
    }
    again = client.post(
        feedback_url(session, turn), json={"rating": "down", "comment": "  old quota  "}
    )
    assert again.json()["rating"] == "down" and again.json()["comment"] == "old quota"

    messages = client.get(f"/api/sessions/{session}").json()["messages"]
    answer = next(m for m in messages if m["role"] == "assistant")
    assert answer["feedback"]["rating"] == "down" and answer["feedback"]["turn"] == turn
    question = next(m for m in messages if m["role"] == "user")
    assert "feedback" not in question

    metrics = client.get("/metrics").text
    assert 'superbiz_feedback_total{rating="down"}' in metrics
    assert 'superbiz_feedback_total{rating="up"}' in metrics
    assert 'superbiz_lookup_verdicts_total{verdict="answer"}' in metrics


def test_feedback_for_a_turn_that_does_not_exist_is_404(client: TestClient) -> None:
    session, turn = answered(client)
    later = client.post(feedback_url(session, turn + 1), json={"rating": "up"})
    assert later.status_code == 404
    assert later.json()["message"] == f"session {session!r} has no turn {turn + 1}"
    nobody = client.post(feedback_url(new_session(), 1), json={"rating": "up"})
    assert nobody.status_code == 404


@pytest.mark.parametrize("rating", ["meh", "UP", "", None, 1])
def test_a_rating_neither_up_nor_down_is_422(client: TestClient, rating: object) -> None:
    session, turn = answered(client)
    response = client.post(feedback_url(session, turn), json={"rating": rating})
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"] == ["body", "rating"]
    assert "'up' or 'down'" in response.json()["message"]


def test_turn_zero_or_not_a_number_is_422(client: TestClient) -> None:
    session, _ = answered(client)
    for turn in ("0", "first"):
        assert client.post(feedback_url(session, turn), json={"rating": "up"}).status_code == 422


def test_a_100_kb_comment_is_refused_with_the_limit_named(client: TestClient) -> None:
    session, turn = answered(client)
    huge = client.post(
        feedback_url(session, turn), json={"rating": "down", "comment": "x" * 100_000}
    )
    assert huge.status_code == 413
    assert "the limit is 65536 bytes" in huge.json()["message"]
    long = client.post(
        feedback_url(session, turn),
        json={"rating": "down", "comment": "x" * (MAX_COMMENT_CHARS + 1)},
    )
    assert long.status_code == 422
    assert f"at most {MAX_COMMENT_CHARS} characters" in long.json()["message"]
    # nothing was stored by either
    messages = client.get(f"/api/sessions/{session}").json()["messages"]
    assert all(m.get("feedback") is None for m in messages)


def test_a_comment_with_control_characters_is_422(client: TestClient) -> None:
    session, turn = answered(client)
    response = client.post(
        feedback_url(session, turn), json={"rating": "down", "comment": "bad\x1b[31m"}
    )
    assert response.status_code == 422
    assert "control characters" in response.json()["message"]


def test_with_a_key_feedback_and_gaps_need_it(
    chat_assistant: Runtime, with_api_key: Callable[[Settings, str], Settings]
) -> None:
    app = create_app(
        with_api_key(chat_assistant.settings, KEY), assistant=chat_assistant, warm_up=False
    )
    client = TestClient(app, raise_server_exceptions=False)
    keyed = {"X-API-Key": KEY}
    session = new_session()
    turn = client.post(
        "/api/chat", json={"session_id": session, "question": "429"}, headers=keyed
    ).json()["turn"]
    # another session's answer, rated by someone without the key
    refused = client.post(feedback_url(session, turn), json={"rating": "down"})
    assert refused.status_code == 401 and refused.json()["error"] == "unauthorized"
    wrong = client.post(
        feedback_url(session, turn), json={"rating": "down"}, headers={"X-API-Key": "nope"}
    )
    assert wrong.status_code == 401
    assert (
        client.get(f"/api/sessions/{session}", headers=keyed).json()["messages"][1]["feedback"]
        is None
    )
    ok = client.post(feedback_url(session, turn), json={"rating": "down"}, headers=keyed)
    assert ok.status_code == 200
    assert client.get("/api/gaps").status_code == 401
    assert client.get("/api/gaps", headers=keyed).status_code == 200


def test_gaps_report_over_http(client: TestClient) -> None:
    session = new_session()
    question = f"How do I rotate the Kafka TLS certificates {uuid.uuid4().hex[:6]}?"
    turn = client.post("/api/chat", json={"session_id": session, "question": question}).json()
    client.post(feedback_url(session, turn["turn"]), json={"rating": "down", "comment": "none"})
    report = client.get("/api/gaps", params={"since": "1h"})
    assert report.status_code == 200, report.text
    body = report.json()
    assert set(body) == {
        "since",
        "domain",
        "questions",
        "gaps",
        "unclustered",
        "clusters",
        "timing_ms",
    }
    cluster = next(c for c in body["clusters"] if question in c["examples"])
    assert cluster["thumbs_down"] == 1 and "none" in cluster["comments"]
    assert {"domain", "count", "sessions", "reasons", "last_asked", "closest_documents"} <= set(
        cluster
    )
    bad = client.get("/api/gaps", params={"since": "yesterday"})
    assert bad.status_code == 422 and "30m, 24h, 7d, 2w" in bad.json()["message"]


def test_clearing_a_session_forgets_its_ratings(
    client: TestClient, chat_assistant: Runtime
) -> None:
    session, turn = answered(client)
    client.post(feedback_url(session, turn), json={"rating": "down"})
    assert chat_assistant.feedback.for_session(session)
    assert client.post("/api/chat/clear", json={"session_id": session}).status_code == 200
    assert chat_assistant.feedback.for_session(session) == {}
    assert client.post(feedback_url(session, turn), json={"rating": "up"}).status_code == 404
