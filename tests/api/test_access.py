"""The permission probe over HTTP: every read of the service, tried by a reader who may
not read the restricted domain and document, after another reader used them.

Who a request is comes from ``request.state.reader`` (``superbiz.api._reader``); here
the test-only ``X-Test-Reader`` header sets it (``with_test_readers``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from access_probe import (
    ALICE,
    BOB,
    HIDDEN_DOCS,
    HR_DOC,
    PROBES,
    RECON_DOC,
    RECON_TITLE,
    access_settings,
    assert_nothing_hidden,
    leaks,
    write_access_kb,
)
from superbiz.access import Reader
from superbiz.agents.extractive import ExtractiveChatModel
from superbiz.agents.runtime import Runtime, open_runtime
from superbiz.api import create_app
from superbiz.evaluation.feedback_export import export_feedback
from superbiz.knowledge.base import KnowledgeBase
from superbiz.knowledge.ingest import Ingestor

#: the test-only header of ``with_test_readers`` (tests/api/conftest.py)
AS_ALICE = {"X-Test-Reader": "alice"}
AS_BOB = {"X-Test-Reader": "bob"}


@pytest.fixture(scope="module")
def assistant(tmp_path_factory: pytest.TempPathFactory, use_embedder: Any) -> Iterator[Runtime]:
    root = tmp_path_factory.mktemp("api-access")
    settings = access_settings(root / "data")
    kb = KnowledgeBase(settings, embedder=use_embedder)
    runtime = open_runtime(settings, kb=kb, model=ExtractiveChatModel())
    assert not Ingestor(kb, domains=runtime.domains).ingest([write_access_kb(root / "kb")]).skipped
    yield runtime
    runtime.close()


@pytest.fixture(scope="module")
def app(
    assistant: Runtime, with_test_readers: Callable[[FastAPI, dict[str, Reader]], FastAPI]
) -> FastAPI:
    made = create_app(assistant.settings, assistant=assistant, warm_up=False)
    return with_test_readers(made, {"alice": ALICE, "bob": BOB})


@pytest.fixture(scope="module")
def client(app: FastAPI) -> TestClient:
    return TestClient(app, raise_server_exceptions=False)


@pytest.fixture(scope="module")
def alices_session(client: TestClient) -> str:
    """Alice asks about both restricted documents and rates the answers down (gaps)."""
    session = f"web-{uuid.uuid4().hex[:8]}"
    for question in (RECON_TITLE, "育儿假申请流程"):
        turn = client.post(
            "/api/chat", json={"session_id": session, "question": question}, headers=AS_ALICE
        )
        assert turn.status_code == 200, turn.text
        assert {c["path"] for c in turn.json()["citations"]} & set(HIDDEN_DOCS)
        rated = client.post(
            f"/api/sessions/{session}/turns/{turn.json()['turn']}/feedback",
            json={"rating": "down", "comment": "not the steps I needed"},
            headers=AS_ALICE,
        )
        assert rated.status_code == 200, rated.text
    return session


def _reads(client: TestClient, headers: dict[str, str], session: str) -> dict[str, Any]:
    """Every read of the service a client can make."""
    got = {
        "documents": client.get("/api/documents", headers=headers),
        "map": client.get("/api/knowledge/map", headers=headers),
        "map_yaml": client.get("/api/knowledge/map", params={"format": "yaml"}, headers=headers),
        "gaps": client.get("/api/gaps", params={"since": "1h"}, headers=headers),
        "session": client.get(f"/api/sessions/{session}", headers=headers),
        "sessions": client.get("/api/sessions", params={"id": session}, headers=headers),
        "trace": client.get(f"/api/sessions/{session}/invocations", headers=headers),
        "metrics": client.get("/metrics", headers=headers),
        "info": client.get("/api/info", headers=headers),
    }
    for name, response in got.items():
        assert response.status_code == 200, (name, response.text)
    return {name: response.text for name, response in got.items()}


def test_bob_reads_nothing_of_them_anywhere(client: TestClient, alices_session: str) -> None:
    reads = _reads(client, AS_BOB, alices_session)
    for name, text in reads.items():
        assert not leaks(text), (name, leaks(text))
    for path in HIDDEN_DOCS:  # the document API: as absent as a path that never existed
        for method in ("get", "delete"):
            hidden = getattr(client, method)(f"/api/documents/{quote(path)}", headers=AS_BOB)
            absent = getattr(client, method)("/api/documents/payment/nope.md", headers=AS_BOB)
            assert hidden.status_code == absent.status_code == 404
            assert hidden.json()["message"].replace(path, "X") == absent.json()["message"].replace(
                "payment/nope.md", "X"
            )
    citation = client.get(f"/api/sessions/{alices_session}/turns/1/citations/1", headers=AS_BOB)
    assert citation.status_code == 404 and citation.json()["error"] == "not_found"


def test_bob_asks_and_streams_and_learns_nothing(client: TestClient, alices_session: str) -> None:
    for question in PROBES:
        own = f"web-{uuid.uuid4().hex[:8]}"
        for session in (own, alices_session):  # his own session, and a follow-up in hers
            answer = client.post(
                "/api/chat", json={"session_id": session, "question": question}, headers=AS_BOB
            )
            assert answer.status_code == 200, answer.text
            assert_nothing_hidden(answer.json(), said=[question])
    stream = client.post(
        "/api/chat_stream",
        json={"session_id": alices_session, "question": RECON_TITLE},
        headers=AS_BOB,
    )
    assert stream.status_code == 200
    assert_nothing_hidden(stream.text, said=[RECON_TITLE])


def test_alice_reads_them_and_everyone_reads_as_she_does(
    client: TestClient, alices_session: str
) -> None:
    hers = _reads(client, AS_ALICE, alices_session)
    assert RECON_DOC in hers["documents"] and HR_DOC in hers["map"]
    assert "not the steps I needed" in hers["gaps"]
    assert RECON_DOC in hers["session"] and RECON_DOC in hers["trace"]
    assert RECON_TITLE in hers["sessions"]
    passage = client.get(f"/api/sessions/{alices_session}/turns/1/citations/1", headers=AS_ALICE)
    assert passage.status_code == 200
    document = client.get(f"/api/documents/{quote(RECON_DOC)}", headers=AS_ALICE)
    assert document.status_code == 200 and "kingfisher" in document.text
    everyone = _reads(client, {}, alices_session)  # no reader set: the single admin key
    for name in ("documents", "map", "map_yaml", "session", "sessions", "trace"):
        assert everyone[name] == hers[name], name


def test_feedback_export_for_bob_holds_nothing_of_them(
    client: TestClient, alices_session: str, assistant: Runtime, tmp_path: Path
) -> None:
    session = f"web-{uuid.uuid4().hex[:8]}"
    for question in (RECON_TITLE, "redis connection pool exhausted"):
        turn = client.post(
            "/api/chat", json={"session_id": session, "question": question}, headers=AS_ALICE
        ).json()
        client.post(
            f"/api/sessions/{session}/turns/{turn['turn']}/feedback",
            json={"rating": "up"},
            headers=AS_ALICE,
        )
    kb = assistant.kb
    bob = kb.view(BOB)
    summary = export_feedback(kb.engine, tmp_path / "bob", may_read=bob.may_read)
    written = {
        str(p.relative_to(tmp_path / "bob")): p.read_text(encoding="utf-8")
        for p in (tmp_path / "bob").rglob("*")
        if p.is_file()
    }
    assert_nothing_hidden({"summary": summary, "files": written})
    assert summary["queries"] >= 1  # the Redis question is his to have
    full = export_feedback(kb.engine, tmp_path / "all")
    assert (tmp_path / "all" / "corpus" / RECON_DOC).is_file()
    assert full["queries"] > summary["queries"]
