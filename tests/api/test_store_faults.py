"""A store that fails in the middle of a turn: 503 naming it, nothing half-recorded, and
the next turn works once the store is back."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from superbiz.agents.runtime import Runtime
from superbiz.api import create_app

FIRST = "Clients receive HTTP 429 Too Many Requests, how do we raise the limit?"
# names no document: an L0 match ("redis pool" is the runbook's file name) would answer it
# in one PRECISE lookup, before the store fails
SECOND = "Redis maxTotal reached and payment callback timeout"


class Flaky:
    """Milvus Lite's collection (or the store's client), failing every search once
    ``fail`` is set."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.fail = False

    def search(self, *args: Any, **kwargs: Any) -> Any:
        if self.fail:
            raise RuntimeError("segment 7 is gone")
        return self.inner.search(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def recorded(client: TestClient, session: str) -> tuple[list[Any], list[Any]]:
    messages = client.get(f"/api/sessions/{session}").json()["messages"]
    calls = client.get(f"/api/sessions/{session}/invocations").json()["invocations"]
    return messages, calls


@pytest.fixture
def served(make_assistant: Callable[..., Runtime]) -> tuple[Runtime, TestClient]:
    runtime = make_assistant()
    app = create_app(runtime.settings, assistant=runtime, warm_up=False)
    return runtime, TestClient(app, raise_server_exceptions=False)


def test_a_vector_store_failing_mid_turn_is_503_and_leaves_no_trace(
    served: tuple[Runtime, TestClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime, client = served
    assert client.post("/api/chat", json={"session_id": "v", "question": FIRST}).status_code == 200
    before = recorded(client, "v")
    memory = runtime.tracker.retrieved_docs("v")
    store: Any = runtime.kb.store
    # Both ways to the collection fail: the gate to Lite in process, and the client
    # the store falls back to when the gate fails.
    flaky = Flaky(store._local_collection())
    monkeypatch.setattr(store, "_local_collection", lambda: flaky)
    flaky_client = Flaky(store._client)
    monkeypatch.setattr(store, "_client", flaky_client)
    rows: list[Any] = []
    add = runtime.invocations.add

    def add_then_break(invocation: Any) -> int:
        rows.append(invocation)
        # the turn's first lookup is recorded; the next search fails
        flaky.fail = flaky_client.fail = True
        return add(invocation)

    monkeypatch.setattr(runtime.invocations, "add", add_then_break)

    failed = client.post("/api/chat", json={"session_id": "v", "question": SECOND})
    assert failed.status_code == 503
    assert failed.json()["error"] == "store_unavailable"
    assert "vector store" in failed.json()["message"]
    assert "segment 7 is gone" in failed.json()["message"]
    assert rows  # the failure came after the turn had recorded a lookup
    assert recorded(client, "v") == before  # no messages, no calls of the failed turn
    assert runtime.tracker.retrieved_docs("v") == memory  # no action memory either

    flaky.fail = flaky_client.fail = False
    monkeypatch.setattr(runtime.invocations, "add", add)
    again = client.post("/api/chat", json={"session_id": "v", "question": SECOND})
    assert again.status_code == 200 and again.json()["turn"] == 2
    assert again.json()["lookups"]


def test_a_relational_store_failing_at_the_end_of_a_turn_is_503_and_undone(
    served: tuple[Runtime, TestClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime, client = served

    def broken(*_: Any) -> None:
        raise OperationalError("INSERT INTO chat_messages", {}, Exception("disk I/O error"))

    monkeypatch.setattr(runtime.chats, "add_turn", broken)
    failed = client.post("/api/chat", json={"session_id": "r", "question": FIRST})
    assert failed.status_code == 503
    body = failed.json()
    assert body["error"] == "store_unavailable"
    assert "relational store (sqlite:///" in body["message"] and "disk I/O" in body["message"]
    assert runtime.invocations.for_session("r") == []  # its lookups ran, and were undone
    assert runtime.tracker.retrieved_docs("r") == {}

    monkeypatch.undo()
    again = client.post("/api/chat", json={"session_id": "r", "question": FIRST})
    assert again.status_code == 200 and again.json()["turn"] == 1
    assert not any(lookup["dedup_reason"] for lookup in again.json()["lookups"])


def test_a_relational_store_failing_before_the_route_is_503_naming_it(
    served: tuple[Runtime, TestClient],
) -> None:
    """The request guard asks the directory whether anyone must sign in before any route
    runs; a store that fails there is the same 503 as one that fails in a turn (it was a
    500 from the middleware), and the next request, once it is back, works."""
    runtime, client = served
    engine = runtime.kb.engine
    with engine.begin() as connection:  # the people's table goes away, as a failing store's would
        connection.execute(text("ALTER TABLE users RENAME TO users_away"))
    try:
        failed = client.post("/api/chat", json={"session_id": "g", "question": FIRST})
    finally:
        with engine.begin() as connection:
            connection.execute(text("ALTER TABLE users_away RENAME TO users"))
    assert failed.status_code == 503, failed.text
    assert failed.json()["error"] == "store_unavailable"
    assert "relational store (sqlite:///" in failed.json()["message"]
    assert "users" in failed.json()["message"]
    assert not runtime.chats.exists("g")

    again = client.post("/api/chat", json={"session_id": "g", "question": FIRST})
    assert again.status_code == 200 and again.json()["turn"] == 1
