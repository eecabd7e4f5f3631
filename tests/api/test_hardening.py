"""Bad HTTP input, written by the tests: each gets its documented answer, before any work.

The limit tests drive the ASGI app directly with a ``receive`` that counts what the app
read, so "refused before the body was read" is measured, not assumed.
"""

from __future__ import annotations

import asyncio
import itertools
import re
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from superbiz.agents.runtime import Runtime
from superbiz.api import create_app
from superbiz.api.guard import UPLOAD_OVERHEAD
from superbiz.config import ServiceSettings

KEY = "k3y"
CROSS_SITE = {"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}


def app_for(assistant: Runtime, **service: Any) -> FastAPI:
    settings = assistant.settings.model_copy(update={"service": ServiceSettings(**service)})
    return create_app(settings, assistant=assistant, warm_up=False)


def client_for(assistant: Runtime, **service: Any) -> TestClient:
    return TestClient(app_for(assistant, **service), raise_server_exceptions=False)


class Sent:
    """What a raw ASGI call got back, and how many body bytes the app read."""

    def __init__(self) -> None:
        self.status = 0
        self.headers: dict[str, str] = {}
        self.body = b""
        self.read = 0


def call(
    app: FastAPI,
    method: str,
    path: str,
    headers: dict[str, str],
    chunks: Iterable[bytes],
) -> Sent:
    """One request straight through ASGI; ``chunks`` is the body as it streams in."""
    sent = Sent()
    body = iter(chunks)
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 5000),
        "server": ("testserver", 80),
    }

    async def receive() -> dict[str, Any]:
        chunk = next(body, None)
        if chunk is None:
            return {"type": "http.disconnect"}
        sent.read += len(chunk)
        return {"type": "http.request", "body": chunk, "more_body": True}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            sent.status = message["status"]
            sent.headers = {k.decode(): v.decode() for k, v in message["headers"]}
        elif message["type"] == "http.response.body":
            sent.body += message.get("body", b"")

    asyncio.run(app(scope, receive, send))
    return sent


def endless(size: int = 64 * 1024) -> Iterable[bytes]:
    return itertools.repeat(b"x" * size)


@pytest.fixture(scope="module")
def keyed(chat_assistant: Runtime) -> FastAPI:
    return app_for(chat_assistant, api_key=KEY)


# -- 4: limits before work ---------------------------------------------------------------


def test_auth_comes_before_the_body(keyed: FastAPI) -> None:
    huge = {"content-type": "application/json", "content-length": str(300 * 2**20)}
    sent = call(keyed, "POST", "/api/chat", huge, endless())
    assert sent.status == 401 and sent.read == 0
    sent = call(keyed, "POST", "/api/documents", {"content-type": "multipart/form-data"}, endless())
    assert sent.status == 401 and sent.read == 0  # a chunked upload without a key


def test_a_declared_length_over_the_limit_is_refused_at_once(chat_app: FastAPI) -> None:
    headers = {"content-type": "application/json", "content-length": str(10 * 2**20)}
    sent = call(chat_app, "POST", "/api/chat", headers, endless())
    assert sent.status == 413 and sent.read == 0
    assert b"payload_too_large" in sent.body


@pytest.mark.parametrize(
    ("path", "content_type"),
    [("/api/chat", "application/json"), ("/api/documents", "multipart/form-data; boundary=b")],
)
def test_a_chunked_body_is_cut_at_the_limit(
    chat_app: FastAPI, chat_assistant: Runtime, path: str, content_type: str
) -> None:
    settings = chat_assistant.settings
    limit = (
        settings.ingest.max_file_bytes + UPLOAD_OVERHEAD
        if path == "/api/documents"
        else settings.service.max_json_bytes
    )
    chunk = 64 * 1024
    prefix = b'--b\r\nContent-Disposition: form-data; name="file"; filename="a.md"\r\n\r\n'
    sent = call(
        chat_app,
        "POST",
        path,
        {"content-type": content_type},
        [prefix, *itertools.repeat(b"x" * chunk, 10_000)],
    )
    assert sent.status == 413, sent.body
    assert sent.read <= limit + chunk  # read no further than the chunk that crossed it


def test_a_json_body_has_a_limit(client: TestClient) -> None:
    response = client.post("/api/chat", json={"question": "x" * 3000, "pad": "y" * 100_000})
    assert response.status_code == 413
    assert response.json()["error"] == "payload_too_large"


# -- 3: same-origin writes, headers, hosts -------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        CROSS_SITE,
        {"Sec-Fetch-Site": "same-site"},
        {"Origin": "https://evil.example"},
        {"Origin": "null"},
    ],
)
def test_cross_origin_writes_are_refused_without_a_key(
    client: TestClient, headers: dict[str, str]
) -> None:
    for method, path, kwargs in [
        ("POST", "/api/chat", {"json": {"question": "你好"}}),
        ("POST", "/api/documents", {"files": {"file": ("p.md", b"# P\n\nplanted\n")}}),
        ("DELETE", "/api/documents/payment/支付失败排查.md", {}),
        ("POST", "/api/chat/clear", {"json": {"session_id": "s"}}),
    ]:
        response = client.request(method, path, headers=headers, **kwargs)
        assert response.status_code == 403, (path, response.text)
        assert response.json()["error"] == "cross_origin"
        assert "access-control-allow-origin" not in response.headers
    documents = [d["path"] for d in client.get("/api/documents").json()["documents"]]
    assert "payment/支付失败排查.md" in documents and "general/p.md" not in documents


@pytest.mark.parametrize(
    "headers",
    [
        {},  # not a browser (curl, scripts)
        {"Sec-Fetch-Site": "same-origin", "Origin": "http://testserver"},
        {"Origin": "http://testserver"},
    ],
)
def test_same_origin_and_non_browser_writes_pass(
    client: TestClient, headers: dict[str, str]
) -> None:
    response = client.post("/api/chat/clear", json={"session_id": "nobody"}, headers=headers)
    assert response.status_code == 200, response.text


def test_a_keyed_write_may_come_from_anywhere(keyed: FastAPI) -> None:
    client = TestClient(keyed, raise_server_exceptions=False)
    response = client.post(
        "/api/chat/clear", json={"session_id": "nobody"}, headers={**CROSS_SITE, "X-API-Key": KEY}
    )
    assert response.status_code == 200
    wrong = client.post(
        "/api/chat/clear", json={"session_id": "x"}, headers={**CROSS_SITE, "X-API-Key": "no"}
    )
    assert wrong.status_code == 401


@pytest.mark.parametrize(
    "path", ["/", "/api/info", "/static/app.js", "/nowhere", "/livez", "/api/sessions/x"]
)
def test_every_response_carries_the_security_headers(client: TestClient, path: str) -> None:
    headers = client.get(path).headers
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["x-frame-options"] == "DENY"
    assert headers["referrer-policy"] == "same-origin"
    csp = headers["content-security-policy"]
    assert "script-src 'self';" in csp and "frame-ancestors 'none'" in csp
    assert "unsafe-inline" not in csp


def test_refusals_carry_the_headers_too(keyed: FastAPI) -> None:
    response = TestClient(keyed).post("/api/chat", json={"question": "x"})
    assert response.status_code == 401 and response.headers["x-frame-options"] == "DENY"


@pytest.mark.parametrize("path", ["/docs", "/redoc"])
def test_the_docs_pages_load_only_the_packages_own_files(client: TestClient, path: str) -> None:
    """No CDN: the pages' scripts are served by superbiz, and the policy allows no other host."""
    response = client.get(path)
    csp = response.headers["content-security-policy"]
    assert "https:" not in csp and "frame-ancestors 'none'" in csp
    sources = re.findall(r'(?:src|href)="([^"]+)"', response.text)
    assert sources and all(s.startswith("/") for s in sources), sources
    for source in sources:
        if source.startswith("/static/"):
            assert client.get(source).status_code == 200, source


def test_allowed_hosts(chat_assistant: Runtime) -> None:
    client = client_for(chat_assistant, allowed_hosts=("kb.example.com", "*.internal"))
    assert client.get("/livez", headers={"Host": "kb.example.com:8000"}).status_code == 200
    assert client.get("/livez", headers={"Host": "a.b.internal"}).status_code == 200
    refused = client.get("/api/info", headers={"Host": "evil.example"})
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_host"


# -- 5: private sessions --------------------------------------------------------------------


def test_server_minted_session_ids_are_unguessable(client: TestClient) -> None:
    ids = {client.post("/api/chat", json={"question": "你好"}).json()["session_id"] for _ in "ab"}
    assert len(ids) == 2
    assert all(re.fullmatch(r"web-[A-Za-z0-9_-]{22}", i) for i in ids)


def test_sessions_need_the_key_when_one_is_set(keyed: FastAPI) -> None:
    client = TestClient(keyed, raise_server_exceptions=False)
    asked = client.post(
        "/api/chat",
        json={"session_id": "private-1", "question": "你好"},
        headers={"X-API-Key": KEY},
    )
    assert asked.status_code == 200
    for path in ("/api/sessions/private-1", "/api/sessions/private-1/invocations"):
        assert client.get(path).status_code == 401
        assert client.get(path, headers={"X-API-Key": KEY}).status_code == 200


def test_json_sent_as_text_says_which_content_type_to_send(client: TestClient) -> None:
    body = b'{"session_id": "plain-1", "question": "hi"}'
    response = client.post("/api/chat", content=body, headers={"Content-Type": "text/plain"})
    assert response.status_code == 422 and response.json()["error"] == "invalid_request"
    assert response.json()["message"] == (
        "body: not read as JSON: send it with Content-Type: application/json"
    )


@pytest.mark.parametrize("question", ["a\x00b", "bell\x07", "esc\x1b[31m"])
def test_control_characters_in_a_question_are_refused_before_work(
    client: TestClient, question: str
) -> None:
    response = client.post("/api/chat", json={"session_id": "ctl-1", "question": question})
    assert response.status_code == 422 and response.json()["error"] == "invalid_request"
    assert response.json()["message"] == (
        "question: must not contain control characters (NUL, ESC …); tabs and line breaks are fine"
    )
    assert client.get("/api/sessions/ctl-1").status_code == 404


# -- 9, 10: bounded metrics, liveness --------------------------------------------------------


def test_metrics_labels_come_from_fixed_sets(client: TestClient) -> None:
    for i in range(30):
        client.request(f"INVENTED{i}", f"/made/up/{i}")
    text = client.get("/metrics").text
    assert "INVENTED" not in text and "/made/up" not in text
    assert 'method="other"' in text and 'route="unmatched"' in text


def test_livez_answers_while_the_stores_are_busy(chat_app: FastAPI, client: TestClient) -> None:
    service = chat_app.state.service
    with service.stores.held(), service._writes.held():  # a long turn or upload holds them
        response = client.get("/livez")
    assert response.status_code == 200 and response.json() == {"status": "alive"}


# -- 6: uploads never replace what they must not ----------------------------------------------


@pytest.fixture
def uploads(make_assistant: Callable[..., Runtime]) -> tuple[TestClient, Runtime]:
    assistant = make_assistant()
    return client_for(assistant), assistant


def post_file(client: TestClient, name: str, text: str, **form: str) -> Any:
    files = {"file": (name, text.encode(), "text/markdown")}
    return client.post("/api/documents", files=files, data={"domain": "payment", **form})


def test_an_upload_never_replaces_a_knowledge_base_document(
    uploads: tuple[TestClient, Runtime],
) -> None:
    client, assistant = uploads
    before = assistant.kb.documents.get("payment/支付失败排查.md")
    for form in ({}, {"overwrite": "true"}):
        response = post_file(client, "支付失败排查.md", "# 假的\n\n替换\n", **form)
        assert response.status_code == 409, response.text
        assert response.json()["error"] == "conflict"
        assert "knowledge-base folder" in response.json()["message"]
    assert assistant.kb.documents.get("payment/支付失败排查.md") == before


def test_an_earlier_upload_is_replaced_only_with_overwrite(
    uploads: tuple[TestClient, Runtime],
) -> None:
    client, _ = uploads
    assert post_file(client, "notes.md", "# Notes\n\nfirst\n").status_code == 201
    assert post_file(client, "notes.md", "# Notes\n\nfirst\n").json()["status"] == "unchanged"
    refused = post_file(client, "notes.md", "# Notes\n\nsecond\n")
    assert refused.status_code == 409 and "overwrite=true" in refused.json()["message"]
    replaced = post_file(client, "notes.md", "# Notes\n\nsecond\n", overwrite="true")
    assert replaced.status_code == 201 and replaced.json()["status"] == "updated"


def test_several_files_in_one_upload_are_a_clear_422(uploads: tuple[TestClient, Runtime]) -> None:
    client, assistant = uploads
    files = [
        ("file", ("one.md", b"# One\n\nfirst\n", "text/markdown")),
        ("file", ("two.md", b"# Two\n\nsecond\n", "text/markdown")),
    ]
    response = client.post("/api/documents", files=files)
    assert response.status_code == 422
    assert "one file per request" in response.json()["message"]
    paths = [d.path for d in assistant.kb.documents.all()]
    assert "general/one.md" not in paths and "general/two.md" not in paths
