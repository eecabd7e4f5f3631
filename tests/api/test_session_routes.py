"""The page's routes: its session list, rename, delete, a cited passage, a whole document."""

from __future__ import annotations

import uuid

from fastapi.testclient import TestClient

from superbiz.agents.runtime import Runtime
from superbiz.api import create_app
from superbiz.config import ServiceSettings

PAYMENT = "payment/支付失败排查.md"
PAYMENT_QUESTION = "支付回调超时怎么办？"


def sid() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


def ask(client: TestClient, session: str, question: str = PAYMENT_QUESTION) -> dict:
    response = client.post("/api/chat", json={"session_id": session, "question": question})
    assert response.status_code == 200, response.text
    return response.json()


def test_the_list_shows_the_named_sessions_with_first_question_latest_first(
    client: TestClient,
) -> None:
    first, second, stranger = sid(), sid(), sid()
    ask(client, first)
    ask(client, first, "Clients receive HTTP 429, how do we raise the limit?")
    ask(client, second, "HTTP 429 Too Many Requests")
    ask(client, stranger)
    listed = client.get("/api/sessions", params={"id": [first, second, "t-never"]}).json()
    rows = listed["sessions"]
    assert [r["session_id"] for r in rows] == [second, first]  # never: no row; stranger: not named
    assert rows[1]["first_question"] == PAYMENT_QUESTION and rows[1]["turns"] == 2
    assert rows[1]["title"] is None and rows[1]["created_at"] <= rows[1]["updated_at"]


def test_listing_every_session_needs_the_key(chat_assistant: Runtime) -> None:
    def app(**service: object) -> TestClient:
        settings = chat_assistant.settings.model_copy(
            update={"service": ServiceSettings(**service)}  # type: ignore[arg-type]
        )
        return TestClient(create_app(settings, assistant=chat_assistant, warm_up=False))

    open_client = app()
    refused = open_client.get("/api/sessions")
    assert refused.status_code == 403 and "service.api-key" in refused.json()["message"]
    session = sid()
    ask(open_client, session)
    keyed = app(api_key="k" * 24)
    assert keyed.get("/api/sessions").status_code == 401
    everything = keyed.get("/api/sessions", headers={"X-API-Key": "k" * 24}).json()
    assert session in [r["session_id"] for r in everything["sessions"]]


def test_rename_keeps_the_name_and_empty_gives_the_question_back(client: TestClient) -> None:
    session = sid()
    ask(client, session)
    renamed = client.patch(f"/api/sessions/{session}", json={"title": "  支付回调  "})
    assert renamed.status_code == 200 and renamed.json()["title"] == "支付回调"
    listed = client.get("/api/sessions", params={"id": session}).json()["sessions"]
    assert listed[0]["title"] == "支付回调"
    assert client.patch(f"/api/sessions/{session}", json={"title": ""}).json()["title"] is None
    bad = client.patch(f"/api/sessions/{session}", json={"title": "x" * 201})
    assert bad.status_code == 422
    assert client.patch(f"/api/sessions/{sid()}", json={"title": "a"}).status_code == 404


def test_delete_forgets_the_session(client: TestClient) -> None:
    session = sid()
    ask(client, session)
    deleted = client.delete(f"/api/sessions/{session}")
    assert deleted.status_code == 200 and deleted.json() == {"session_id": session, "deleted": True}
    assert client.get(f"/api/sessions/{session}").status_code == 404
    assert client.get(f"/api/sessions/{session}/invocations").status_code == 404
    assert client.delete(f"/api/sessions/{session}").status_code == 404


def test_a_citation_opens_the_passage_the_model_was_shown(client: TestClient) -> None:
    session = sid()
    answer = ask(client, session)
    cited = next(c for c in answer["citations"] if c["path"] == PAYMENT)
    response = client.get(f"/api/sessions/{session}/turns/1/citations/{cited['ref']}")
    assert response.status_code == 200, response.text
    passage = response.json()
    assert passage["path"] == PAYMENT and passage["domain"] == "payment"
    assert passage["excerpt"] and passage["relevance_level"] in {"PRECISE", "HIGHLY_RELEVANT"}
    assert passage["heading_path"] and passage["heading_path"][0]
    whole = client.get(passage["document_url"])
    assert whole.status_code == 200 and whole.headers["content-type"].startswith("text/plain")
    assert passage["excerpt"].splitlines()[-1].rstrip("…")[:20] in whole.text
    assert client.get(f"/api/sessions/{session}/turns/1/citations/99").status_code == 404
    assert client.get(f"/api/sessions/{session}/turns/0/citations/1").status_code == 422


def test_a_missing_document_is_a_404(client: TestClient) -> None:
    response = client.get("/api/documents/payment/nowhere.md")
    assert response.status_code == 404 and response.json()["error"] == "not_found"
