"""``superbiz mcp --transport http`` (streamable HTTP), driven by the SDK's own clients.

A handshake-era client (``ClientSession``) gets an ``Mcp-Session-Id``, which is its
superbiz session; a 2026-07-28 client (``Client``) has no session, so it continues one by
passing back the ``session_id`` that every result names. One server runs for the module.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx
import pytest
import yaml
from mcp.client.client import Client
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.types import CallToolResult
from sqlalchemy import text
from starlette.responses import PlainTextResponse
from starlette.testclient import TestClient
from typer.testing import CliRunner

from access_probe import HR_DOC, PROBES, RECON_TITLE, assert_nothing_hidden, write_access_kb
from oidc_provider import Provider, id_token, running_provider
from superbiz import cli
from superbiz._net import accepts_connections, free_port
from superbiz.config import OidcSettings, Settings
from superbiz.governance.tracker import SqlSessionTracker
from superbiz.storage.chat import ChatMessage, ChatRepository
from superbiz.storage.db import open_database
from superbiz.storage.invocations import Invocation

T = TypeVar("T")
STARTUP_TIMEOUT_S = 120
CALL_TIMEOUT_S = 60
GOOD = {"PRECISE", "HIGHLY_RELEVANT"}
SMALL_KB_DOMAINS = {"api", "general", "infrastructure", "ops", "payment"}
QUERIES = [
    "Redis connection pool exhausted",
    "429 Too Many Requests",
    "deployment checklist before deploying",
    "what does idempotency mean",
    "退款失败怎么办",
    "maxTotal 配置",
    "throttling quota",
    "notify the on-call engineer",
]


@dataclass
class HttpServer:
    process: subprocess.Popen[bytes]
    url: str
    data_dir: Path
    log: Path

    def stop(self) -> None:
        """Interrupt the server (it closes its stores) and wait for it to exit."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _wait_listening(server: HttpServer, port: int) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            pytest.fail(f"the MCP server exited early:\n{server.log.read_text()[-3000:]}")
        if accepts_connections(port):
            return
        time.sleep(0.1)
    server.stop()
    pytest.fail(f"the MCP server did not listen within {STARTUP_TIMEOUT_S} s")


@contextlib.contextmanager
def _server(
    data_dir: Path, *options: str, env: dict[str, str] | None = None
) -> Iterator[HttpServer]:
    """``superbiz mcp --transport http`` on a free port, reached at 127.0.0.1."""
    port = free_port()
    log = data_dir.parent / f"server-{port}.log"
    command = [sys.executable, "-m", "superbiz.cli", "mcp", "--transport", "http"]
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [*command, "--port", str(port), "--data-dir", str(data_dir), *options],
            stdout=sink,
            stderr=subprocess.STDOUT,
            cwd=data_dir.parent,
            env={**os.environ, **(env or {})},
        )
    server = HttpServer(process, f"http://127.0.0.1:{port}/mcp", data_dir, log)
    try:
        _wait_listening(server, port)
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def http_server(mcp_data_dir: Path) -> Iterator[HttpServer]:
    with _server(mcp_data_dir) as server:
        yield server


def _run(scenario: Callable[[], Awaitable[T]]) -> T:
    async def bounded() -> T:
        with anyio.fail_after(CALL_TIMEOUT_S):
            return await scenario()

    return anyio.run(bounded)


@contextlib.asynccontextmanager
async def _handshake_session(url: str) -> AsyncIterator[ClientSession]:
    """A handshake-era (2025) client: the server gives it an ``Mcp-Session-Id``."""
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def _data(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


def test_lists_tools_domains_and_the_map(http_server: HttpServer) -> None:
    async def scenario() -> tuple[Any, dict[str, Any], str]:
        async with _handshake_session(http_server.url) as session:
            tools = (await session.list_tools()).tools
            domains = _data(await session.call_tool("list_domains", {}))
            contents = (await session.read_resource("knowledge://map")).contents
            return tools, domains, getattr(contents[0], "text", "")

    tools, domains, map_text = _run(scenario)
    schemas = {tool.name: tool.input_schema for tool in tools}
    assert set(schemas) == {"lookup_knowledge", "list_domains"}
    assert set(schemas["lookup_knowledge"]["properties"]) == {
        "query",
        "domain",
        "missing_dimension",
        "session_id",
    }
    assert {d["domain_id"] for d in domains["domains"]} == SMALL_KB_DOMAINS
    parsed = yaml.safe_load(map_text)
    assert {d["domain_id"] for d in parsed["available_knowledge_domains"]} == SMALL_KB_DOMAINS


def test_an_mcp_session_is_one_governed_session(http_server: HttpServer) -> None:
    async def scenario() -> list[dict[str, Any]]:
        async with _handshake_session(http_server.url) as session:
            calls = []
            for query in ["支付回调超时", "支付回调超时", *QUERIES]:
                calls.append(_data(await session.call_tool("lookup_knowledge", {"query": query})))
                if calls[-1]["verdict"] == "stop":
                    break
            calls.append(
                _data(await session.call_tool("lookup_knowledge", {"query": "and one more"}))
            )
            return calls

    calls = _run(scenario)
    first, repeat, after = calls[0], calls[1], calls[-1]
    assert first["session_id"].startswith("mcp-")
    assert {c["session_id"] for c in calls} == {first["session_id"]}  # the Mcp-Session-Id
    assert first["found"] is True and first["relevance_level"] in GOOD
    assert first["verdict"] == "answer" and first["budget_left"] == 7
    assert repeat["relevance_level"] == "DEDUPED"
    assert repeat["dedup_reason"] in {"domain_retrieved", "doc_retrieved"}
    assert calls[-2]["verdict"] == "stop"
    assert after["relevance_level"] == "DEDUPED"
    assert after["dedup_reason"] == "budget_exhausted"
    assert after["verdict"] == "stop" and after["breaker"]


def test_a_named_session_continues_across_connections(http_server: HttpServer) -> None:
    arguments = {"query": "429 Too Many Requests", "session_id": "team-http"}

    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        async with _handshake_session(http_server.url) as session:
            first = _data(await session.call_tool("lookup_knowledge", arguments))
        async with Client(http_server.url) as client:  # another connection, another era
            second = _data(await client.call_tool("lookup_knowledge", arguments))
        return first, second

    first, second = _run(scenario)
    assert first["session_id"] == second["session_id"] == "mcp-team-http"  # MCP's namespace
    assert first["found"] is True and first["primary"]["domain"] == "api"
    # Same server process: the same turn goes on, with its water level and closed domains.
    assert second["relevance_level"] == "DEDUPED"
    assert second["dedup_reason"] == "domain_retrieved"
    assert second["budget_left"] == first["budget_left"] - 1


def test_a_sessionless_client_continues_with_the_session_id_it_was_given(
    http_server: HttpServer,
) -> None:
    async def scenario() -> list[dict[str, Any]]:
        async with Client(http_server.url) as client:
            assert client.protocol_version == "2026-07-28"  # no sessions in this era
            query = {"query": "Redis connection pool exhausted"}
            first = _data(await client.call_tool("lookup_knowledge", query))
            unnamed = _data(await client.call_tool("lookup_knowledge", query))
            named = {**query, "session_id": first["session_id"]}
            continued = _data(await client.call_tool("lookup_knowledge", named))
            return [first, unnamed, continued]

    first, unnamed, continued = _run(scenario)
    assert first["found"] is True
    assert unnamed["session_id"] != first["session_id"]  # a new session: nothing to dedup
    assert unnamed["found"] is True
    assert continued["session_id"] == first["session_id"]
    assert continued["relevance_level"] == "DEDUPED"


def test_malformed_calls_are_error_results(http_server: HttpServer) -> None:
    async def scenario() -> list[CallToolResult]:
        async with Client(http_server.url) as client:
            return [
                await client.call_tool("lookup_knowledge", {"query": "", "session_id": "bad"}),
                await client.call_tool(
                    "lookup_knowledge", {"query": "refund", "domain": "nope", "session_id": "bad"}
                ),
                await client.call_tool("lookup_knowledge", {"query": "refund", "session_id": " "}),
                await client.call_tool(
                    "lookup_knowledge", {"query": "refund", "session_id": "team/http"}
                ),
            ]

    empty, unknown, blank, slashed = _run(scenario)
    assert empty.is_error and unknown.is_error and blank.is_error and slashed.is_error
    assert "query" in (empty.structured_content or {})["error"]
    assert "unknown domain" in (unknown.structured_content or {})["error"]
    assert (blank.structured_content or {})["error"] == "'session_id' must not be blank"
    # the page reaches a session by its id in a path: MCP makes none it could not reach
    assert (slashed.structured_content or {})["error"] == (
        "'session_id' must not hold a control character, '/' or '\\'"
    )


# -- the service's key, Host and Origin rules; sessions apart from the web's -------------------

KEY = "mcp-k3y"
BEARER = {"Authorization": f"Bearer {KEY}"}
#: a web chat's session, which has retrieved the api domain's documents
WEB_SESSION = "web-chat-1"
#: a web chat whose client chose an id in MCP's namespace
WEB_NAMED_LIKE_MCP = "mcp-chosen-by-a-web-client"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "1"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


def _web_session_retrieved(data_dir: Path) -> dict[str, str]:
    engine = open_database(f"sqlite:///{data_dir / 'superbiz.db'}")
    try:
        return SqlSessionTracker(engine).retrieved_docs(WEB_SESSION)
    finally:
        engine.dispose()


@pytest.fixture(scope="module")
def guarded_server(mcp_kb: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    """Listening on every address (``0.0.0.0``) with ``service.api-key`` set, beside a
    web chat session that has retrieved the api domain."""
    data = tmp_path_factory.mktemp("mcp-guarded") / "data"
    shutil.copytree(mcp_kb, data)
    engine = open_database(f"sqlite:///{data / 'superbiz.db'}")
    try:
        with engine.connect() as connection:
            docs = connection.execute(text("SELECT domain, path FROM documents")).all()
        SqlSessionTracker(engine).mark_many(
            WEB_SESSION, [(domain, path) for domain, path in docs if domain == "api"]
        )
        answer = ChatMessage(WEB_NAMED_LIKE_MCP, 1, "assistant", "…")
        ChatRepository(engine).add_turn(WEB_NAMED_LIKE_MCP, 1, "a question", answer)
    finally:
        engine.dispose()
    with _server(data, "--host", "0.0.0.0", env={"SUPERBIZ_SERVICE__API_KEY": KEY}) as server:
        yield server


def test_mcp_over_http_needs_the_api_key_as_a_bearer_token(guarded_server: HttpServer) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"X-API-Key": "wrong"}):
        refused = httpx.post(
            guarded_server.url, json=INITIALIZE, headers={**MCP_HEADERS, **headers}, timeout=30
        )
        assert refused.status_code == 401, refused.text
        assert refused.json()["error"] == "unauthorized"
        assert refused.headers["www-authenticate"] == "Bearer"
    served = httpx.post(
        guarded_server.url, json=INITIALIZE, headers={**MCP_HEADERS, **BEARER}, timeout=30
    )
    assert served.status_code == 200, served.text


def test_mcp_over_http_refuses_other_hosts_even_with_the_key(guarded_server: HttpServer) -> None:
    """Listening on 0.0.0.0 with ``allowed-hosts`` empty: loopback names and the address
    the request came in on, never a DNS name someone pointed here."""
    for host in ("evil.example", "kb.example.com"):
        refused = httpx.post(
            guarded_server.url,
            json=INITIALIZE,
            headers={**MCP_HEADERS, **BEARER, "Host": host},
            timeout=30,
        )
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"] == "invalid_host"
        assert "service.allowed-hosts" in refused.json()["message"]
    port = guarded_server.url.split(":")[2].split("/")[0]
    for host in (f"localhost:{port}", f"127.0.0.1:{port}"):
        served = httpx.post(
            guarded_server.url,
            json=INITIALIZE,
            headers={**MCP_HEADERS, **BEARER, "Host": host},
            timeout=30,
        )
        assert served.status_code == 200, served.text


def test_a_web_chats_session_id_names_another_session_over_mcp(
    guarded_server: HttpServer,
) -> None:
    """The web chat retrieved the api domain: passing its id must neither read that (the
    lookup would be DEDUPED) nor mark documents in it."""
    before = _web_session_retrieved(guarded_server.data_dir)
    assert before

    async def scenario() -> dict[str, Any]:
        async with (
            create_mcp_http_client(headers=BEARER) as http,
            streamable_http_client(guarded_server.url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            arguments = {"query": "429 Too Many Requests", "session_id": WEB_SESSION}
            return _data(await session.call_tool("lookup_knowledge", arguments))

    called = _run(scenario)
    assert called["session_id"] == f"mcp-{WEB_SESSION}"
    assert called["found"] is True and called["relevance_level"] in GOOD
    assert _web_session_retrieved(guarded_server.data_dir) == before


def test_a_chat_session_named_like_an_mcp_one_is_refused(guarded_server: HttpServer) -> None:
    async def scenario() -> CallToolResult:
        async with (
            create_mcp_http_client(headers=BEARER) as http,
            streamable_http_client(guarded_server.url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            arguments = {"query": "429 Too Many Requests", "session_id": WEB_NAMED_LIKE_MCP}
            return await session.call_tool("lookup_knowledge", arguments)

    refused = _run(scenario)
    assert refused.is_error
    assert "chat session" in (refused.structured_content or {})["error"]


def test_the_guard_refuses_cross_origin_calls_without_the_key() -> None:
    """The service's Origin rule, on the guard alone: a browser page elsewhere may not
    drive the MCP endpoint; a client that sends no Origin is no browser."""
    from superbiz.api.guard import McpGuard

    async def ok(scope: Any, receive: Any, send: Any) -> None:
        await PlainTextResponse("ok")(scope, receive, send)

    client = TestClient(McpGuard(ok, Settings()), base_url="http://127.0.0.1:8765")
    cross = client.post("/mcp", headers={"Origin": "https://evil.example"})
    assert cross.status_code == 403 and cross.json()["error"] == "cross_origin"
    site = client.post("/mcp", headers={"Sec-Fetch-Site": "cross-site"})
    assert site.status_code == 403
    assert client.post("/mcp", headers={"Origin": "http://127.0.0.1:8765"}).status_code == 200
    assert client.post("/mcp").status_code == 200


def test_mcp_over_http_warns_when_it_listens_beyond_loopback_without_a_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}
    monkeypatch.setattr("superbiz.mcp_server.serve", lambda settings, **kwargs: seen.update(kwargs))
    args = ["mcp", "--transport", "http", "--host", "0.0.0.0", "--data-dir", str(tmp_path)]
    result = CliRunner().invoke(cli.app, args)
    assert result.exit_code == 0, result.output
    assert seen["host"] == "0.0.0.0"
    assert "nobody is asked to sign in" in result.output
    quiet = CliRunner().invoke(cli.app, ["mcp", "--transport", "http", "--data-dir", str(tmp_path)])
    assert "nobody is asked to sign in" not in quiet.output


def test_calls_are_recorded_once_the_server_is_gone(
    http_server: HttpServer, read_invocations: Callable[[Path, str], list[Invocation]]
) -> None:
    """Runs last in this module: it stops the shared server before reading the store."""
    http_server.stop()
    assert http_server.process.returncode == 0, http_server.log.read_text()[-3000:]
    named = read_invocations(http_server.data_dir, "mcp-team-http")
    assert [(r.executed, r.dedup_reason) for r in named] == [
        (True, None),
        (False, "domain_retrieved"),
    ]
    assert named[0].retrieval_details is not None and named[0].relevance_level in GOOD
    assert named[1].retrieval_details is None and named[1].relevance_level == "DEDUPED"
    assert [r.step for r in named] == [1, 2] and {r.turn for r in named} == {1}
    bad = read_invocations(http_server.data_dir, "mcp-bad")
    assert len(bad) == 2 and all(r.error and not r.executed for r in bad)


@pytest.fixture(scope="module")
def people_server(
    mcp_kb: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[HttpServer, dict[str, str]]]:
    """Served with no admin key but two people added (``superbiz users add``): their own
    keys are what MCP clients send."""
    from superbiz.auth.directory import UserDirectory
    from superbiz.config import AuthSettings

    data = tmp_path_factory.mktemp("mcp-people") / "data"
    shutil.copytree(mcp_kb, data)
    engine = open_database(f"sqlite:///{data / 'superbiz.db'}")
    try:
        directory = UserDirectory(engine, AuthSettings())
        keys = {name: directory.add(name, "reader", [], "test")[1] for name in ("alice", "bob")}
    finally:
        engine.dispose()
    with _server(data) as server:
        yield server, keys


def _lookup_as(url: str, key: str, session_id: str) -> CallToolResult:
    async def scenario() -> CallToolResult:
        async with (
            create_mcp_http_client(headers={"Authorization": f"Bearer {key}"}) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            arguments = {"query": "429 Too Many Requests", "session_id": session_id}
            return await session.call_tool("lookup_knowledge", arguments)

    return _run(scenario)


def test_people_use_mcp_with_their_own_keys_and_own_their_sessions(
    people_server: tuple[HttpServer, dict[str, str]],
) -> None:
    server, keys = people_server
    anonymous = httpx.post(server.url, json=INITIALIZE, headers=MCP_HEADERS, timeout=30)
    assert anonymous.status_code == 401
    revoked = httpx.post(
        server.url,
        json=INITIALIZE,
        headers={**MCP_HEADERS, "Authorization": "Bearer sbz_" + "x" * 43},
        timeout=30,
    )
    assert revoked.status_code == 401 and revoked.json()["message"] == "unknown or revoked API key"

    alices = _data(_lookup_as(server.url, keys["alice"], "team-notes"))
    assert alices["session_id"] == "mcp-team-notes" and alices["found"] is True
    again = _data(_lookup_as(server.url, keys["alice"], "team-notes"))
    assert again["relevance_level"] == "DEDUPED"  # her session's action memory
    # the same name from another person is a session that does not exist for them
    bobs = _lookup_as(server.url, keys["bob"], "team-notes")
    assert bobs.is_error
    assert (bobs.structured_content or {})["error"] == "no session 'mcp-team-notes'"
    assert _data(_lookup_as(server.url, keys["bob"], "bobs-notes"))["found"] is True


# -- the permission probe over HTTP, with people's own keys and the provider's tokens -------

#: what an MCP client of the probe's server reads in one session: each probe's lookup
#: (the later ones after the earlier ones' action memory) and one naming the hidden domain
PROBE_TIMEOUT_S = 300


@dataclass
class AccessServer:
    server: HttpServer
    keys: dict[str, str]
    provider: Provider
    oidc: OidcSettings


@pytest.fixture(scope="module")
def access_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AccessServer]:
    """The probe's KB (``access.domains`` restricts hr; a payment document has its own
    ``access:``) served over HTTP with the team's provider configured and three people
    added with ``superbiz users add``: alice (payments, hr-team), bob (sre), ada (admin)."""
    root = tmp_path_factory.mktemp("mcp-access")
    data = root / "data"
    access = {"SUPERBIZ_ACCESS__DOMAINS": '{"hr": ["hr-team"]}'}
    ingest = [sys.executable, "-m", "superbiz.cli", "ingest", str(write_access_kb(root / "kb"))]
    done = subprocess.run(
        [*ingest, "--data-dir", str(data)],
        capture_output=True,
        text=True,
        timeout=STARTUP_TIMEOUT_S,
        cwd=root,
        env={**os.environ, **access},
    )
    assert done.returncode == 0, done.stderr
    keys = {}
    for name, options in (
        ("alice", ["-g", "payments", "-g", "hr-team"]),
        ("bob", ["-g", "sre"]),
        ("ada", ["--role", "admin"]),
    ):
        args = ["users", "add", name, *options, "--data-dir", str(data), "--json"]
        added = CliRunner().invoke(cli.app, args)
        assert added.exit_code == 0, added.output
        keys[name] = json.loads(added.output)["api_key"]
    with running_provider() as provider:
        provider.add_user("sub-bob", preferred_username="bob", groups=["sre"])
        oidc = OidcSettings(
            issuer=provider.issuer, client_id="superbiz-mcp", client_secret="mcp-secret"
        )
        env = {
            **access,
            "SUPERBIZ_AUTH__OIDC__ISSUER": provider.issuer,
            "SUPERBIZ_AUTH__OIDC__CLIENT_ID": "superbiz-mcp",
            "SUPERBIZ_AUTH__OIDC__CLIENT_SECRET": "mcp-secret",
        }
        with _server(data, env=env) as server:
            yield AccessServer(server, keys, provider, oidc)


def _everything_over_http(url: str, credential: str, session: str) -> dict[str, Any]:
    """What an MCP client sending ``credential`` reads: the domains, the map, each probe's
    lookup in ``session`` and one that names the hidden domain."""

    async def scenario() -> dict[str, Any]:
        async with (
            create_mcp_http_client(headers={"Authorization": f"Bearer {credential}"}) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            domains = _data(await client.call_tool("list_domains", {}))
            contents = (await client.read_resource("knowledge://map")).contents
            lookups = []
            for query in [*PROBES, "hr 育儿假"]:
                arguments = {"query": query, "session_id": session}
                lookups.append(_data(await client.call_tool("lookup_knowledge", arguments)))
            arguments = {"query": "leave", "domain": "hr", "session_id": session}
            named = await client.call_tool("lookup_knowledge", arguments)
            return {
                "domains": domains,
                "map": [getattr(c, "text", "") for c in contents],
                "lookups": lookups,
                "named": named.structured_content,
            }

    async def bounded() -> dict[str, Any]:
        with anyio.fail_after(PROBE_TIMEOUT_S):
            return await scenario()

    return anyio.run(bounded)


def test_bob_over_http_with_his_key_or_token_learns_nothing_of_what_he_may_not_read(
    access_server: AccessServer,
) -> None:
    url, keys = access_server.server.url, access_server.keys
    hers = _everything_over_http(url, keys["alice"], "alices-notes")
    assert "hr" in {d["domain_id"] for d in hers["domains"]["domains"]}
    assert RECON_TITLE in hers["map"][0]
    assert any((r.get("primary") or {}).get("path") == HR_DOC for r in hers["lookups"])

    said = [*PROBES, "hr 育儿假", "'hr'"]
    his = _everything_over_http(url, keys["bob"], "bobs-notes")
    for part in ("domains", "map"):
        assert_nothing_hidden(his[part])
    assert_nothing_hidden(his["lookups"], said=said)
    assert "unknown domain" in json.dumps(his["named"])
    assert_nothing_hidden(his["named"], said=said)
    # the provider's ID token makes him the same reader (groups from the token)
    token = id_token(access_server.provider, access_server.oidc, "sub-bob")
    by_token = _everything_over_http(url, token, "bobs-token-notes")
    assert by_token["domains"] == his["domains"] and by_token["map"] == his["map"]
    assert_nothing_hidden(by_token["lookups"], said=said)
    # her session's name is a session that does not exist for him
    theirs = _lookup_as(url, keys["bob"], "alices-notes")
    assert theirs.is_error
    assert (theirs.structured_content or {})["error"] == "no session 'mcp-alices-notes'"
    # an admin reads what she reads
    admins = _everything_over_http(url, keys["ada"], "adas-notes")
    assert admins["domains"] == hers["domains"] and admins["map"] == hers["map"]
    levels = [
        (r.get("relevance_level"), (r.get("primary") or {}).get("path")) for r in hers["lookups"]
    ]
    assert levels == [
        (r.get("relevance_level"), (r.get("primary") or {}).get("path")) for r in admins["lookups"]
    ]
