"""With ``service.api-key`` set, every ``/api`` route but ``/api/info`` needs it (checked
before the body is read); the page, the probes and the metrics stay open."""

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
# a binary upload (refused before storing), a delete of an unknown document.
WRITES: list[tuple[str, str, dict[str, Any], int]] = [
    ("POST", "/api/chat", {"json": {"question": "你好"}}, 200),
    ("POST", "/api/chat_stream", {"json": {"question": "你好"}}, 200),
    ("POST", "/api/chat/clear", {"json": {"session_id": "nobody"}}, 200),
    ("POST", "/api/chat/cancel", {"json": {"session_id": "nobody"}}, 200),
    ("POST", "/api/documents", {"files": {"file": ("x.md", b"\x00\x01", "text/plain")}}, 422),
    ("DELETE", "/api/documents/no/such.md", {}, 404),
    ("GET", "/api/sessions/nobody", {}, 404),
    ("GET", "/api/sessions/nobody/invocations", {}, 404),
    # the documents list and the map name documents, which may be restricted to groups
    ("GET", "/api/documents", {}, 200),
    ("GET", "/api/knowledge/map", {}, 200),
]


@pytest.fixture(scope="module")
def client(
    chat_assistant: Runtime, with_api_key: Callable[[Settings, str], Settings]
) -> TestClient:
    app = create_app(
        with_api_key(chat_assistant.settings, KEY), assistant=chat_assistant, warm_up=False
    )
    return TestClient(app, raise_server_exceptions=False)


@pytest.mark.parametrize(("method", "path", "kwargs", "ok"), WRITES)
def test_write_endpoints_need_the_key(
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
        ("/api/info", 200),
        ("/healthz", 200),
        ("/metrics", 200),
        ("/livez", 200),
    ],
)
def test_read_endpoints_stay_open(client: TestClient, path: str, status: int) -> None:
    assert client.get(path).status_code == status


def test_info_says_a_key_is_needed(client: TestClient) -> None:
    assert client.get("/api/info").json()["auth_required"] is True
