"""With ``service.api-key`` set, every ``/api`` route but ``/api/info``, and
``/metrics``, need it (checked before the body is read): writes, sessions, and every read
that shows the knowledge base or its operations. The page, ``/api/info``, the probes and
the API's description stay open."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from superbiz.agents.runtime import Runtime
from superbiz.api import create_app
from superbiz.config import Settings

KEY = "s3cret-key"
# Requests that pass auth without changing the shared KB: a clear of an unknown session,
# a binary upload (refused before storing), a delete of an unknown document, and the reads
# that show the KB's contents (documents, a document's text, the map, the sources with
# their URLs and skip reasons) or its operations (metrics). Sources, map, documents and
# metrics answered without the key before.
GUARDED: list[tuple[str, str, dict[str, Any], int]] = [
    ("POST", "/api/chat", {"json": {"question": "你好"}}, 200),
    ("POST", "/api/chat_stream", {"json": {"question": "你好"}}, 200),
    ("POST", "/api/chat/clear", {"json": {"session_id": "nobody"}}, 200),
    ("POST", "/api/chat/cancel", {"json": {"session_id": "nobody"}}, 200),
    ("POST", "/api/documents", {"files": {"file": ("x.md", b"\x00\x01", "text/plain")}}, 422),
    ("DELETE", "/api/documents/no/such.md", {}, 404),
    ("GET", "/api/sessions/nobody", {}, 404),
    ("GET", "/api/sessions/nobody/invocations", {}, 404),
    # the documents list and the map name documents, which may be restricted to groups
    ("GET", "/api/sources", {}, 200),
    ("GET", "/api/documents", {}, 200),
    ("GET", "/api/documents/no/such.md", {}, 404),
    ("GET", "/api/knowledge/map", {}, 200),
    ("GET", "/api/knowledge/map?format=yaml", {}, 200),
    ("GET", "/api/gaps", {}, 200),
    ("GET", "/metrics", {}, 200),
]


@pytest.fixture(scope="module")
def client(
    chat_assistant: Runtime, with_api_key: Callable[[Settings, str], Settings]
) -> TestClient:
    app = create_app(
        with_api_key(chat_assistant.settings, KEY), assistant=chat_assistant, warm_up=False
    )
    return TestClient(app, raise_server_exceptions=False)


@pytest.mark.parametrize(("method", "path", "kwargs", "ok"), GUARDED)
def test_writes_and_every_read_of_the_kb_or_its_operations_need_the_key(
    client: TestClient, method: str, path: str, kwargs: dict[str, Any], ok: int
) -> None:
    missing = client.request(method, path, **kwargs)
    assert missing.status_code == 401
    assert missing.json()["error"] == "unauthorized" and "API key" in missing.json()["message"]
    assert missing.json()["message"].startswith("sign in first")
    assert missing.headers["www-authenticate"] == "Bearer"
    wrong = client.request(method, path, headers={"X-API-Key": "nope"}, **kwargs)
    assert wrong.status_code == 401
    with_header = client.request(method, path, headers={"X-API-Key": KEY}, **kwargs)
    assert with_header.status_code == ok, with_header.text
    bearer = client.request(method, path, headers={"Authorization": f"Bearer {KEY}"}, **kwargs)
    assert bearer.status_code == ok, bearer.text


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/", 200),
        ("/static/app.js", 200),
        ("/api/info", 200),
        ("/healthz", 200),
        ("/livez", 200),
        ("/docs", 200),
        ("/openapi.json", 200),
    ],
)
def test_the_page_info_probes_and_api_description_stay_open(
    client: TestClient, path: str, status: int
) -> None:
    assert client.get(path).status_code == status


def test_info_says_a_key_is_needed(client: TestClient) -> None:
    assert client.get("/api/info").json()["auth_required"] is True
