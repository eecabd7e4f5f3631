"""The command, HTTP and MCP references are the code's own: every command and option
described, every route and tool listed, every link inside a page resolving."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from superbiz.reference import GENERATORS
from superbiz.reference.commands import commands, commands_markdown
from superbiz.reference.http import http_markdown, openapi
from superbiz.reference.mcp import mcp_markdown

_ANNOTATION = re.compile(r"\s*\[(default|required)[^\]]*\]|\s*\[x[<>=].*?\]")


def test_every_command_and_option_has_a_description() -> None:
    found = commands()
    paths = {command.path for command in found}
    assert {"superbiz ingest", "superbiz eval agent", "superbiz feedback export"} <= paths
    bare = [command.path for command in found if not command.help.strip()]
    assert not bare, f"give these commands a docstring (or help=): {bare}"
    undescribed = [
        f"{command.path} {parameter.declaration}"
        for command in found
        for parameter in command.parameters
        if not _ANNOTATION.sub("", parameter.help).strip()
    ]
    assert not undescribed, f"give these arguments and options a help=: {undescribed}"


def test_the_command_reference_shows_each_command_usage_and_option() -> None:
    text = commands_markdown()
    for command in commands():
        assert f"`{command.path}`" in text and f"`{command.usage}`" in text
        for parameter in command.parameters:
            assert f"`{parameter.declaration}`" in text
    assert "Print one JSON object." in text  # the help text itself, not only the flags


@pytest.fixture(scope="module")
def http_page() -> str:
    return http_markdown()


def test_every_route_of_the_openapi_document_has_its_section(http_page: str) -> None:
    document = openapi()
    for path, item in document["paths"].items():
        for method in item:
            assert f"## `{method.upper()} {path}`" in http_page
    assert "`POST /api/chat`" in http_page and "`GET /healthz`" in http_page


def test_every_schema_link_of_the_http_page_has_its_target(http_page: str) -> None:
    links = set(re.findall(r"\]\(#(http-schema-[a-z0-9-]+)\)", http_page))
    targets = set(re.findall(r"^\((http-schema-[a-z0-9-]+)\)=$", http_page, re.M))
    assert links and links <= targets, sorted(links - targets)


def test_the_mcp_page_lists_each_tool_with_its_arguments() -> None:
    text = mcp_markdown()
    assert "## Tool `lookup_knowledge`" in text and "## Tool `list_domains`" in text
    for argument in ("query", "domain", "missing_dimension", "session_id"):
        assert f"| `{argument}`" in text
    assert "| `query` (required) |" in text
    assert "## Resource `knowledge://map`" in text


def test_every_generated_reference_is_placed_on_a_page_of_the_site() -> None:
    """A page holds ``<!-- reference: NAME -->`` for each generator (the site's build fills
    it), so what these tests check is what the site shows; no marker names nothing."""
    docs = Path(__file__).resolve().parents[2] / "docs"
    placed = {
        name: page.relative_to(docs).as_posix()
        for page in docs.rglob("*.md")
        if "_build" not in page.parts
        for name in re.findall(r"^<!-- reference: ([a-z-]+) -->$", page.read_text("utf-8"), re.M)
    }
    assert set(placed) == set(GENERATORS), placed
    assert placed["settings"] == "reference/settings.md"
    assert placed["settings-advanced"] == "settings-advanced.md"
