"""The MCP surface of ``superbiz mcp``, from the server itself: each tool with its
description, annotations and input schema, and each resource."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import anyio

from superbiz.reference._markdown import code, properties_table


def mcp_surface() -> tuple[list[Any], list[Any]]:
    """The tools and resources the server lists, from a server over an empty, temporary
    data dir (what it lists does not depend on the knowledge base)."""
    from superbiz.config import load_settings
    from superbiz.mcp_server import GovernedRetrieval, build_server

    with tempfile.TemporaryDirectory() as data_dir:
        service = GovernedRetrieval(load_settings(data_dir=Path(data_dir)))
        try:
            server = build_server(service)

            async def listed() -> tuple[list[Any], list[Any]]:
                return list(await server.list_tools()), list(await server.list_resources())

            return anyio.run(listed)
        finally:
            service.close()


def mcp_markdown() -> str:
    """The MCP reference: tools, then resources."""
    tools, resources = mcp_surface()
    lines: list[str] = []
    for tool in tools:
        lines += [f"## Tool {code(tool.name)}", "", tool.description or "", ""]
        hints = tool.annotations.model_dump(exclude_none=True) if tool.annotations else {}
        if hints:
            lines += ["Annotations: " + ", ".join(f"{code(k)} {v}" for k, v in hints.items()), ""]
        schema = tool.input_schema
        lines += properties_table("argument", schema, _type) or ["It takes no arguments.", ""]
        lines += [
            "Input schema:",
            "",
            "```json",
            json.dumps(schema, indent=2, ensure_ascii=False),
            "```",
            "",
        ]
    for resource in resources:
        lines += [f"## Resource {code(str(resource.uri))}", ""]
        lines += [f"{resource.description or ''} ({code(resource.mime_type or '')})", ""]
    return "\n".join(lines)


def _type(schema: dict[str, Any]) -> str:
    if "anyOf" in schema:
        return " or ".join(_type(option) for option in schema["anyOf"])
    return str(schema.get("type", "any"))
