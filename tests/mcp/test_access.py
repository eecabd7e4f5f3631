"""The permission probe over MCP: ``lookup_knowledge``, ``list_domains`` and
``knowledge://map`` for a server that serves one reader (``superbiz mcp --as-group``),
through the SDK's client in process."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.client import Client

from access_probe import (
    ALICE,
    BOB,
    HR_DOC,
    PROBES,
    RECON_TITLE,
    access_settings,
    assert_nothing_hidden,
    write_access_kb,
)
from superbiz.access import Reader
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.mcp_server import MAP_URI, GovernedRetrieval, build_server


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory, use_embedder: Any) -> Path:
    root = tmp_path_factory.mktemp("mcp-access")
    kb = KnowledgeBase(access_settings(root / "data"), embedder=use_embedder)
    try:
        assert not Ingestor(kb).ingest([write_access_kb(root / "kb")]).skipped
    finally:
        kb.close()
    return root / "data"


@pytest.fixture
def serve_as(data_dir: Path, use_embedder: Any) -> Iterator[Any]:
    opened: list[GovernedRetrieval] = []

    def make(reader: Reader) -> GovernedRetrieval:
        kb = KnowledgeBase(access_settings(data_dir), embedder=use_embedder)
        opened.append(GovernedRetrieval(kb.settings, kb=kb, reader=reader))
        return opened[-1]

    yield make
    for service in opened:
        service.close()


def _everything(service: GovernedRetrieval, session: str) -> dict[str, Any]:
    """What an MCP client of ``service`` reads: the domains, the map, and each probe's
    lookup (in one session: the later ones after the earlier ones' action memory)."""

    async def scenario() -> dict[str, Any]:
        async with Client(build_server(service)) as client:
            domains = await client.call_tool("list_domains", {})
            resource = await client.read_resource(MAP_URI)
            lookups = []
            for query in [*PROBES, "hr 育儿假"]:
                result = await client.call_tool(
                    "lookup_knowledge", {"query": query, "session_id": session}
                )
                lookups.append(result.structured_content)
            named = await client.call_tool(
                "lookup_knowledge", {"query": "leave", "domain": "hr", "session_id": session}
            )
            return {
                "domains": domains.structured_content,
                "map": [getattr(c, "text", "") for c in resource.contents],
                "lookups": lookups,
                "named": named.structured_content,
            }

    return anyio.run(scenario)


def test_bob_over_mcp_learns_nothing_of_what_he_may_not_read(serve_as: Any) -> None:
    seen = _everything(serve_as(BOB), "probe")
    said = [*PROBES, "hr 育儿假", "'hr'"]
    assert_nothing_hidden(seen["domains"])
    assert_nothing_hidden(seen["map"])
    assert_nothing_hidden(seen["lookups"], said=said)
    assert "unknown domain" in json.dumps(seen["named"])
    assert_nothing_hidden(seen["named"], said=said)


def test_alice_over_mcp_reads_them_and_bob_continues_her_session_blind(serve_as: Any) -> None:
    hers = _everything(serve_as(ALICE), "shared")
    assert "hr" in [d["domain_id"] for d in hers["domains"]["domains"]]
    assert RECON_TITLE in hers["map"][0]
    assert any((r.get("primary") or {}).get("path") == HR_DOC for r in hers["lookups"])
    # bob names her session: her action memory is not his (no DEDUPED of hers, no domain)
    his = _everything(serve_as(BOB), "shared")
    assert_nothing_hidden(his["lookups"], said=[*PROBES, "hr 育儿假"])
    everyone = _everything(serve_as(Reader.everyone()), "someone")
    assert everyone["domains"] == hers["domains"] and everyone["map"] == hers["map"]
