"""``superbiz mcp`` over stdio, driven by the SDK's own client.

One stdio connection is one superbiz session: the water level, dedup and action memory
hold across its calls without any executor around the tool, and every call is recorded.
One conversation runs per module (a server start costs seconds); the tests read it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import CallToolResult, Tool

from superbiz.storage.invocations import Invocation

TIMEOUT_S = 180
FIRST = "支付回调超时"
OTHERS = [
    "Redis connection pool exhausted",
    "429 Too Many Requests",
    "deployment checklist before deploying",
    "what does idempotency mean",
    "退款失败怎么办",
    "maxTotal 配置",
    "throttling quota",
    "notify the on-call engineer",
]
NAMED = "shared-stdio"
#: the superbiz session of NAMED: MCP session ids are apart from the web's
NAMED_SESSION = f"mcp-{NAMED}"
NAMED_QUERY = "Redis connection pool exhausted"
GOOD = {"PRECISE", "HIGHLY_RELEVANT"}
BLOCK_REASONS = {"domain_retrieved", "budget_exhausted", "supplement_needs_dimension"}
#: the domains of the small KB in tests/conftest.py
SMALL_KB_DOMAINS = {"api", "general", "infrastructure", "ops", "payment"}


@dataclass
class Conversation:
    """What the client saw, in order, and what the store recorded afterwards."""

    tools: list[Tool] = field(default_factory=list)
    resource_uris: list[str] = field(default_factory=list)
    session_calls: list[dict[str, Any]] = field(default_factory=list)
    errors: list[CallToolResult] = field(default_factory=list)
    named_first: dict[str, Any] = field(default_factory=dict)
    named_second: dict[str, Any] = field(default_factory=dict)
    domains: dict[str, Any] = field(default_factory=dict)
    map_text: str = ""
    rows: list[Invocation] = field(default_factory=list)
    named_rows: list[Invocation] = field(default_factory=list)


def _params(data_dir: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "superbiz.cli", "mcp", "--data-dir", str(data_dir)],
        cwd=str(data_dir.parent),
    )


def _data(result: CallToolResult) -> dict[str, Any]:
    assert result.structured_content is not None, result.content
    return result.structured_content


async def _lookup(session: ClientSession, **arguments: Any) -> dict[str, Any]:
    result = await session.call_tool("lookup_knowledge", arguments)
    assert not result.is_error, result.content
    return _data(result)


async def _first_connection(data_dir: Path, seen: Conversation) -> None:
    async with (
        stdio_client(_params(data_dir)) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        seen.tools = (await session.list_tools()).tools
        seen.resource_uris = [str(r.uri) for r in (await session.list_resources()).resources]

        seen.session_calls.append(await _lookup(session, query=FIRST))
        seen.session_calls.append(await _lookup(session, query=FIRST))
        for query in OTHERS:
            seen.session_calls.append(await _lookup(session, query=query))
            if seen.session_calls[-1]["verdict"] == "stop":
                break
        seen.session_calls.append(await _lookup(session, query="one more lookup after stop"))

        seen.errors.append(await session.call_tool("lookup_knowledge", {"query": "   "}))
        seen.errors.append(
            await session.call_tool("lookup_knowledge", {"query": "refund", "domain": "nope"})
        )
        seen.named_first = await _lookup(session, query=NAMED_QUERY, session_id=NAMED)

        seen.domains = _data(await session.call_tool("list_domains", {}))
        contents = (await session.read_resource("knowledge://map")).contents
        seen.map_text = getattr(contents[0], "text", "")


async def _second_connection(data_dir: Path, seen: Conversation) -> None:
    """A new client, hence a new server process, continues the named session."""
    async with (
        stdio_client(_params(data_dir)) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        seen.named_second = await _lookup(session, query=NAMED_QUERY, session_id=NAMED)


@pytest.fixture(scope="module")
def conversation(
    mcp_data_dir: Path, read_invocations: Callable[[Path, str], list[Invocation]]
) -> Conversation:
    seen = Conversation()

    async def run() -> None:
        with anyio.fail_after(TIMEOUT_S):
            await _first_connection(mcp_data_dir, seen)
            await _second_connection(mcp_data_dir, seen)

    anyio.run(run)
    # Both server processes are gone: the store can be read.
    seen.rows = read_invocations(mcp_data_dir, seen.session_calls[0]["session_id"])
    seen.named_rows = read_invocations(mcp_data_dir, NAMED_SESSION)
    return seen


def test_lists_both_tools_with_their_input_schemas(conversation: Conversation) -> None:
    tools = {tool.name: tool for tool in conversation.tools}
    assert set(tools) == {"lookup_knowledge", "list_domains"}
    lookup = tools["lookup_knowledge"].input_schema
    assert set(lookup["properties"]) == {"query", "domain", "missing_dimension", "session_id"}
    assert lookup["required"] == ["query"]
    assert "verdict" in (tools["lookup_knowledge"].description or "")
    assert tools["list_domains"].input_schema["properties"] == {}
    assert conversation.resource_uris == ["knowledge://map"]


def test_first_lookup_finds_with_a_level_and_the_governors_verdict(
    conversation: Conversation,
) -> None:
    first = conversation.session_calls[0]
    assert first["found"] is True
    assert first["relevance_level"] in GOOD
    assert first["primary"]["domain"] == "payment"
    assert first["session_id"].startswith("mcp-")
    assert first["verdict"] == "answer"
    assert first["budget_left"] == 7
    assert first["water_level"] == "low"
    assert first["breaker"]  # the "answer now" prompt an executor would have injected


def test_a_repeated_lookup_is_deduplicated(conversation: Conversation) -> None:
    repeat = conversation.session_calls[1]
    assert repeat["found"] is False
    assert repeat["relevance_level"] == "DEDUPED"
    assert repeat["dedup_reason"] in {"domain_retrieved", "doc_retrieved"}
    assert repeat["primary"] is None
    assert repeat["budget_left"] == 6
    assert repeat["breaker"]  # what an executor would inject before the next step


def test_one_session_reaches_the_stop_verdict_and_then_blocks(
    conversation: Conversation,
) -> None:
    calls = conversation.session_calls
    assert {c["session_id"] for c in calls} == {calls[0]["session_id"]}
    stopped = calls[-2]
    assert stopped["verdict"] == "stop"
    assert stopped["breaker"]  # high water or repeated blocks: the tool is taken away
    after = calls[-1]
    assert after["relevance_level"] == "DEDUPED"
    assert after["dedup_reason"] == "budget_exhausted"
    assert after["verdict"] == "stop"
    assert after["found"] is False and after["primary"] is None
    assert after["breaker"]
    assert len(calls) <= 10  # the water level caps the session at 8 admitted calls


def test_malformed_calls_are_error_results_not_crashes(conversation: Conversation) -> None:
    empty, unknown = conversation.errors
    assert empty.is_error and unknown.is_error
    assert "query" in _data(empty)["error"]
    assert "unknown domain 'nope'" in _data(unknown)["error"]
    assert _data(unknown)["verdict"] == "error"


def test_list_domains_and_the_map_resource(conversation: Conversation) -> None:
    domains = {d["domain_id"]: d for d in conversation.domains["domains"]}
    assert set(domains) == SMALL_KB_DOMAINS
    assert all(d["document_count"] == 1 and d["description"] for d in domains.values())
    parsed = yaml.safe_load(conversation.map_text)
    listed = {d["domain_id"] for d in parsed["available_knowledge_domains"]}
    assert listed == SMALL_KB_DOMAINS


def test_every_call_is_recorded_blocked_ones_without_a_retrieval(
    conversation: Conversation,
) -> None:
    rows = conversation.rows
    calls = conversation.session_calls
    assert len(rows) == len(calls) + len(conversation.errors)
    assert rows[0].executed and rows[0].retrieval_details is not None
    assert rows[0].relevance_level in GOOD
    blocked = [r for r in rows if not r.executed and r.error is None]
    assert blocked, "the repeat and the call after stop were blocked"
    for row in blocked:
        assert row.relevance_level == "DEDUPED"
        assert row.dedup_reason in BLOCK_REASONS
        assert row.retrieval_details is None
    assert rows[len(calls) - 1].dedup_reason == "budget_exhausted"
    errors = [r for r in rows if r.error]
    assert len(errors) == 2 and all(r.verdict == "error" for r in errors)
    assert [r.step for r in rows] == list(range(1, len(rows) + 1))


def test_a_named_session_continues_in_a_new_server_process(conversation: Conversation) -> None:
    first, second = conversation.named_first, conversation.named_second
    assert first["session_id"] == second["session_id"] == NAMED_SESSION
    assert first["found"] is True and first["relevance_level"] in GOOD
    # The second process starts a new turn, but the session's action memory is in the
    # store: the only relevant document was already retrieved.
    assert second["relevance_level"] == "DEDUPED"
    assert second["dedup_reason"] == "doc_retrieved"
    assert [r.turn for r in conversation.named_rows] == [1, 2]
