"""Small Markdown helpers the reference generators share."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any


def code(text: str) -> str:
    """``text`` as an inline code span, whatever backticks it holds."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    padded = f" {text} " if text.startswith("`") or text.endswith("`") else text
    return f"{fence}{padded}{fence}"


def first_sentence(text: str) -> str:
    """The text up to its first full stop that ends a sentence, on one line."""
    flat = " ".join(text.split())
    found = re.search(r"(?<!e\.g)(?<!i\.e)(?<=[A-Za-z0-9)`])[.;](\s|$)", flat)
    return flat[: found.start()] if found else flat


def cell(text: str) -> str:
    """``text`` fit for one cell of a Markdown table."""
    return " ".join(text.split()).replace("|", "\\|")


def properties_table(
    heading: str, schema: dict[str, Any], kind: Callable[[dict[str, Any]], str]
) -> list[str]:
    """A JSON schema's properties as a table: name (and whether it is required), type as
    ``kind`` writes it, description. Empty when the schema has none."""
    properties = schema.get("properties", {})
    if not properties:
        return []
    required = set(schema.get("required", []))
    lines = [f"| {heading} | type | what it is |", "| --- | --- | --- |"]
    for name, definition in properties.items():
        mark = " (required)" if name in required else ""
        text = cell(definition.get("description", ""))
        lines.append(f"| {code(name)}{mark} | {kind(definition)} | {text} |")
    return [*lines, ""]
