"""Bad HTTP input, written by the tests: each gets its documented answer, before any work.

The limit tests drive the ASGI app directly with a ``receive`` that counts what the app
read, so "refused before the body was read" is measured, not assumed.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from conftest import refuse_titles, write_kb
from superbiz.agents.runtime import Runtime, open_runtime
from superbiz.api import create_app
from superbiz.api.guard import UPLOAD_OVERHEAD
from superbiz.config import ServiceSettings, Settings
from superbiz.evaluation._service_server import LiveServer
from superbiz.governance.tool import TOOL_NAME
from superbiz.knowledge.coverage.domains import DomainService
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.llm.base import ChatModel
from superbiz.llm.messages import ToolCall
from superbiz.retrieval.embedders import Embedder
from superbiz.testing import ScriptedChatModel, answer, calls

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


@pytest.mark.parametrize(
    "host", ["localhost:8000", "127.0.0.1", "127.0.0.1:8000", "[::1]:8000", "testserver"]
)
def test_by_default_loopback_names_and_the_bound_address_are_accepted(
    client: TestClient, host: str
) -> None:
    """``testserver`` is the address the test client's requests come in on."""
    assert client.get("/api/info", headers={"Host": host}).status_code == 200


@pytest.mark.parametrize("host", ["evil.example", "kb.example.com:8000", "127.0.0.1.evil.example"])
def test_by_default_other_names_are_refused_with_how_to_add_one(
    client: TestClient, host: str
) -> None:
    """DNS rebinding: a page at evil.example whose name now points at the server would
    otherwise read and write it as the server's own origin."""
    refused = client.get("/api/info", headers={"Host": host})
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_host"
    assert "service.allowed-hosts" in refused.json()["message"]
    assert "SUPERBIZ_SERVICE__ALLOWED_HOSTS" in refused.json()["message"]


@pytest.mark.parametrize("allowed", [(), ("kb.example.com",)])
@pytest.mark.parametrize("path", ["/livez", "/healthz"])
def test_probes_are_answered_whatever_the_host(
    chat_assistant: Runtime, allowed: tuple[str, ...], path: str
) -> None:
    """A Kubernetes probe sends the pod's IP as Host: a 400 would restart a healthy pod."""
    client = client_for(chat_assistant, allowed_hosts=allowed)
    assert client.get(path, headers={"Host": "10.42.0.17:8000"}).status_code == 200
    assert client.get("/api/info", headers={"Host": "10.42.0.17:8000"}).status_code == 400


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


def test_an_overwrite_postgresql_refuses_keeps_the_earlier_upload(
    make_assistant: Callable[..., Runtime], database_factory: Callable[[str], str]
) -> None:
    url = database_factory("postgresql")
    assistant = make_assistant(database_url=url)
    client = client_for(assistant)
    first = "# Notes\n\nzebracrossing first\n"
    assert post_file(client, "notes.md", first).status_code == 201
    before = assistant.kb.documents.get("payment/notes.md")
    assert before is not None
    refuse_titles(url, "REFUSED")

    refused = post_file(client, "notes.md", "# REFUSED\n\nsecond\n", overwrite="true")
    assert refused.status_code == 422, refused.text
    assert "refused by the database" in refused.json()["message"]
    assert assistant.kb.documents.get("payment/notes.md") == before
    assert Path(before.source_file).read_text(encoding="utf-8") == first
    state = assistant.kb.store.index_state(["payment/notes.md"])
    assert state == {"payment/notes.md": (before.chunk_count, frozenset([before.content_hash]))}
    listed = {d["path"]: d for d in client.get("/api/documents").json()["documents"]}
    assert listed["payment/notes.md"]["chunk_count"] == before.chunk_count


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


# -- issue 24: no model argument, frontmatter value, header or upload takes anything down -----

PAYMENT = "payment/支付失败排查.md"
PLAN = json.dumps(
    {
        "need_retrieval": True,
        "domains": [{"domain": "payment", "sub_question": "支付回调超时怎么办"}],
        "direct_answer": None,
    }
)
#: an answer drawn from the payment runbook, which the plan's lookup shows as [1]
GROUNDED = "支付渠道回调超时时，先检查网关日志 [1]。"
PAY_Q = "支付回调超时怎么办？"


@pytest.fixture
def store_assistant(
    tmp_path: Path, database_url: str, use_embedder: Embedder
) -> Iterator[Callable[..., Runtime]]:
    """``make(model=None, **settings)`` → a Runtime over the small KB on SQLite and on
    PostgreSQL, closed after the test (before its schema is dropped)."""
    opened: list[Runtime] = []

    def make(model: ChatModel | None = None, **overrides: Any) -> Runtime:
        data = tmp_path / f"data-{len(opened)}"
        settings = Settings(data_dir=data, database_url=database_url, **overrides)
        kb = KnowledgeBase(settings, embedder=use_embedder)
        opened.append(runtime := open_runtime(settings, kb=kb, model=model))
        # domains summarised without the model: its script is for the turn
        Ingestor(kb, domains=DomainService(kb)).ingest([write_kb(tmp_path / "kb")])
        return runtime

    yield make
    for runtime in opened:
        runtime.close()


def invocations(client: TestClient, session_id: str) -> list[dict[str, Any]]:
    """The session's recorded calls, in order."""
    response = client.get(f"/api/sessions/{session_id}/invocations")
    assert response.status_code == 200, response.text
    rows: list[dict[str, Any]] = response.json()["invocations"]
    return rows


def test_tool_arguments_of_a_wrong_type_are_recorded_errors_told_to_the_model(
    store_assistant: Callable[..., Runtime],
) -> None:
    """A ``missing_dimension`` that is no string crashed the turn (500) where the re-plan
    joined it; it is a malformed call like any other."""
    dimensions = {
        "list": ["连接池", "退款"],
        "number": 42,
        "object": {"what": "退款"},
        "bool": True,
    }
    wrong = [
        ToolCall.of(name, TOOL_NAME, {"query": "退款失败", "missing_dimension": value})
        for name, value in dimensions.items()
    ]
    model = ScriptedChatModel(PLAN, calls(*wrong), answer(GROUNDED))
    client = client_for(store_assistant(model=model))

    response = client.post("/api/chat", json={"session_id": "dim-1", "question": PAY_Q})

    assert response.status_code == 200, response.text
    assert response.json()["answer"] == GROUNDED
    reason = "'missing_dimension' must be a string"
    for name in dimensions:
        assert model.steps[-1].tool_result(name) == {"error": reason}  # told to the model
    plan, *rows = invocations(client, "dim-1")
    assert plan["origin"] == "plan" and plan["executed"] is True
    for row, value in zip(rows, dimensions.values(), strict=True):
        assert row["verdict"] == "error" and row["error"] == reason
        assert row["executed"] is False and row["origin"] == "model"
        assert row["arguments"]["missing_dimension"] == value  # what the model sent


def test_a_huge_tool_argument_is_refused_and_recorded_cut(
    store_assistant: Callable[..., Runtime],
) -> None:
    """A model's 475,000-character query ran 24 s holding the store lock; it is refused
    before any search, like a question over 4,000 characters, and recorded cut."""
    huge = ToolCall.of("huge", TOOL_NAME, {"query": "连接池 " * 118_750})
    model = ScriptedChatModel(PLAN, calls(huge), answer(GROUNDED))
    client = client_for(store_assistant(model=model))

    response = client.post(
        "/api/chat", json={"session_id": "huge-1", "question": "支付回调超时怎么办？"}
    )

    assert response.status_code == 200, response.text
    reason = "'query' is 475000 characters long; it takes at most 4000"
    assert model.steps[-1].tool_result("huge") == {"error": reason}
    row = invocations(client, "huge-1")[1]
    assert row["verdict"] == "error" and row["error"] == reason
    assert list(row["arguments"]) == ["_raw"] and len(row["arguments"]["_raw"]) == 501
    assert response.json()["lookups"][1]["arguments"] == row["arguments"]


@pytest.mark.parametrize(
    ("frontmatter", "reason"),
    [
        (
            "reviewed: 2024-02-30",
            "frontmatter field 'reviewed': 2024-02-30 is not a date (day is out of range for "
            "month); quote it to keep it as text",
        ),
        (
            f"ticket: {'9' * 5000}",
            "frontmatter field 'ticket': a number of 5000 characters is too long to read; "
            "quote it to keep it as text",
        ),
        (
            "score: .nan",
            "frontmatter field 'score' is nan, which no store keeps as a number; quote it to "
            "keep it as text",
        ),
        (
            "limits: {max: .inf}",
            "frontmatter field 'limits' is inf, which no store keeps as a number; quote it to "
            "keep it as text",
        ),
    ],
    ids=["impossible-date", "huge-number", "nan", "inf"],
)
def test_an_upload_with_an_unreadable_frontmatter_value_is_a_422_naming_the_key(
    uploads: tuple[TestClient, Runtime], frontmatter: str, reason: str
) -> None:
    client, assistant = uploads
    text = f"---\ntitle: Reviewed\n{frontmatter}\n---\n# Reviewed\n\nbody\n"

    response = post_file(client, "reviewed.md", text)

    assert response.status_code == 422, response.text
    assert response.json()["error"] == "invalid_document"
    assert response.json()["message"] == f"payment/reviewed.md: {reason}"
    assert assistant.kb.documents.get("payment/reviewed.md") is None
    assert not (assistant.settings.data_dir / "uploads" / "payment" / "reviewed.md").exists()


@pytest.mark.parametrize(
    ("method", "path", "headers", "service"),
    [
        ("GET", "/api/info", {"host": "[::1"}, {"allowed_hosts": ("kb.example.com",)}),
        ("GET", "/api/documents", {"host": "["}, {}),
        ("POST", "/api/chat/clear", {"host": "testserver", "origin": "http://["}, {}),
        ("POST", "/api/chat/clear", {"host": "testserver", "origin": "http://[::1"}, {}),
    ],
    ids=["host-allowed-hosts", "host", "origin", "origin-unclosed"],
)
def test_a_malformed_host_or_origin_is_a_400_without_a_traceback(
    chat_assistant: Runtime,
    caplog: pytest.LogCaptureFixture,
    method: str,
    path: str,
    headers: dict[str, str],
    service: dict[str, Any],
) -> None:
    body = [b'{"session_id": "nobody"}'] if method == "POST" else []
    json_type = {"content-type": "application/json"} if method == "POST" else {}
    with caplog.at_level(logging.ERROR):
        sent = call(
            app_for(chat_assistant, **service), method, path, {**headers, **json_type}, body
        )

    assert sent.status == 400, sent.body
    name = "Origin" if "origin" in headers else "Host"
    assert json.loads(sent.body) == {
        "error": "bad_request",
        "message": f"malformed {name} header: not a host or URL",
    }
    assert not caplog.records  # no "unexpected error" with its traceback


def test_nul_in_a_url_or_in_what_a_model_writes_is_never_a_store_failure(
    store_assistant: Callable[..., Runtime],
) -> None:
    """PostgreSQL refused NUL where SQLite kept it: a path parameter gave 500 there and 404
    here, a model's answer or tool arguments with NUL failed the turn (503) there. Both
    stores now answer alike: a name with NUL is found nowhere (404), and what a model
    wrote is stored without NUL, the answer returned being the one stored."""
    nul_query = ToolCall.of("nul-query", TOOL_NAME, {"query": "退款\x00失败"})
    nul_key = ToolCall.of("nul-key", TOOL_NAME, {"query": "退款失败", "no\x00te": "x"})
    nul_answer = "支付渠道回调超时时，\x00先检查网关日志 [1]。"
    model = ScriptedChatModel(PLAN, calls(nul_query, nul_key), answer(nul_answer))
    client = client_for(store_assistant(model=model))

    for method, path in [
        ("GET", "/api/sessions/a%00b"),
        ("GET", "/api/sessions/a%00b/invocations"),
        ("DELETE", "/api/documents/a%00b.md"),
        ("DELETE", "/api/documents/payment/%00.md"),
    ]:
        response = client.request(method, path)
        assert response.status_code == 404, (path, response.text)
        assert response.json()["error"] == "not_found"

    response = client.post(
        "/api/chat", json={"session_id": "nul-1", "question": "支付回调超时怎么办？"}
    )

    assert response.status_code == 200, response.text
    assert response.json()["answer"] == GROUNDED  # NUL removed
    stored = client.get("/api/sessions/nul-1").json()["messages"]
    assert [m["content"] for m in stored] == ["支付回调超时怎么办？", GROUNDED]
    assert model.steps[-1].tool_result("nul-query") == {
        "error": "'query' contains the control character U+0000"
    }
    rows = invocations(client, "nul-1")
    assert rows[1]["verdict"] == "error" and rows[1]["arguments"] == {"query": "退款失败"}
    assert rows[2]["error"] == "unknown arguments: note"
    assert rows[2]["arguments"] == {"query": "退款失败", "note": "x"}


class GatedEmbedder(Embedder):
    """The real USE model, except that a batch holding ``marker`` waits at a gate: an
    ingest of text with the marker is then observably in progress until the test opens
    the gate (or a minute passes)."""

    def __init__(self, inner: Embedder, marker: str) -> None:
        self.inner = inner
        self.name = inner.name
        self.marker = marker
        self.reached = threading.Event()
        self.opened = threading.Event()

    def _embed_raw(self, texts: list[str]) -> Any:
        if any(self.marker in text for text in texts):
            self.reached.set()
            self.opened.wait(timeout=60)
        return self.inner._embed_raw(texts)


def test_an_upload_being_ingested_blocks_no_chat_stream_list_map_or_session_read(
    tmp_path: Path, use_embedder: Embedder
) -> None:
    """A 1.5 MB upload held the store lock for its whole ingest (47 s): every chat,
    stream and read waited. Its ingest is held here in its embedding, at a gate, while
    the other requests are made; each completes before the gate opens."""
    marker = "zqxgatemarker"
    embedder = GatedEmbedder(use_embedder, marker)
    settings = Settings(data_dir=tmp_path / "data")  # SQLite and Milvus Lite: a store lock
    kb = KnowledgeBase(settings, embedder=embedder)
    runtime = open_runtime(settings, kb=kb)
    Ingestor(kb, domains=runtime.domains).ingest([write_kb(tmp_path / "kb")])
    assert runtime.store_lock.enabled
    section = f"## Step {{}}\n\nCheck the {marker} gateway logs, then the order status.\n\n"
    upload = ("# Gateway runbook\n\n" + "".join(section.format(i) for i in range(2000))).encode()
    assert len(upload) > 150_000
    uploaded: list[httpx.Response] = []
    app = create_app(settings, assistant=runtime, warm_up=False)
    try:
        with LiveServer(app) as server, httpx.Client(base_url=server.url, timeout=20) as client:
            client.post("/api/chat", json={"session_id": "ingest-1", "question": "退款失败"})
            thread = threading.Thread(
                target=lambda: uploaded.append(
                    httpx.post(
                        f"{server.url}/api/documents",
                        files={"file": ("gateway.md", upload, "text/markdown")},
                        data={"domain": "ops"},
                        timeout=120,
                    )
                )
            )
            thread.start()
            assert embedder.reached.wait(timeout=60), "the upload's ingest never started"
            try:
                assert client.get("/api/documents").status_code == 200
                assert client.get("/api/knowledge/map").status_code == 200
                assert client.get("/api/sessions/ingest-1").status_code == 200
                chat = client.post("/api/chat", json={"session_id": "ingest-2", "question": PAY_Q})
                assert chat.status_code == 200 and chat.json()["citations"]
                streamed = client.post(
                    "/api/chat_stream", json={"session_id": "ingest-3", "question": PAY_Q}
                )
                assert streamed.status_code == 200 and "event: done" in streamed.text
                assert "event: error" not in streamed.text
                assert client.get("/healthz").json()["status"] == "ok"
                # all of it while the upload was still being ingested
                assert thread.is_alive() and not uploaded
            finally:
                embedder.opened.set()
                thread.join(timeout=120)
            [response] = uploaded
            assert response.status_code == 201, response.text
            paths = [d["path"] for d in client.get("/api/documents").json()["documents"]]
            assert "ops/gateway.md" in paths
    finally:
        runtime.close()
