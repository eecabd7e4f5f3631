"""``superbiz mcp --transport http`` (streamable HTTP), driven by the SDK's own clients.

A handshake-era client (``ClientSession``) gets an ``Mcp-Session-Id``, which is its
superbiz session; a 2026-07-28 client (``Client``) has no session, so it continues one by
passing back the ``session_id`` that every result names. One server runs for the module.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
import yaml
from mcp.client.client import Client
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

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


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_listening(server: HttpServer, port: int) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            pytest.fail(f"the MCP server exited early:\n{server.log.read_text()[-3000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    server.stop()
    pytest.fail(f"the MCP server did not listen within {STARTUP_TIMEOUT_S} s")


@pytest.fixture(scope="module")
def http_server(mcp_data_dir: Path) -> Iterator[HttpServer]:
    port = _free_port()
    log = mcp_data_dir.parent / "server.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "superbiz.cli",
                "mcp",
                "--transport",
                "http",
                "--port",
                str(port),
                "--data-dir",
                str(mcp_data_dir),
            ],
            stdout=sink,
            stderr=subprocess.STDOUT,
            cwd=mcp_data_dir.parent,
        )
    server = HttpServer(process, f"http://127.0.0.1:{port}/mcp", mcp_data_dir, log)
    try:
        _wait_listening(server, port)
        yield server
    finally:
        server.stop()


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
    assert first["session_id"] == second["session_id"] == "team-http"
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
            ]

    empty, unknown, blank = _run(scenario)
    assert empty.is_error and unknown.is_error and blank.is_error
    assert "query" in (empty.structured_content or {})["error"]
    assert "unknown domain" in (unknown.structured_content or {})["error"]
    assert "session_id" in (blank.structured_content or {})["error"]


def test_calls_are_recorded_once_the_server_is_gone(
    http_server: HttpServer, read_invocations: Callable[[Path, str], list[Invocation]]
) -> None:
    """Runs last in this module: it stops the shared server before reading the store."""
    http_server.stop()
    assert http_server.process.returncode == 0, http_server.log.read_text()[-3000:]
    named = read_invocations(http_server.data_dir, "team-http")
    assert [(r.executed, r.dedup_reason) for r in named] == [
        (True, None),
        (False, "domain_retrieved"),
    ]
    assert named[0].retrieval_details is not None and named[0].relevance_level in GOOD
    assert named[1].retrieval_details is None and named[1].relevance_level == "DEDUPED"
    assert [r.step for r in named] == [1, 2] and {r.turn for r in named} == {1}
    bad = read_invocations(http_server.data_dir, "bad")
    assert len(bad) == 2 and all(r.error and not r.executed for r in bad)
