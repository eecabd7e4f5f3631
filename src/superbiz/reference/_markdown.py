"""Small Markdown helpers the reference generators share."""

from __future__ import annotations

import re


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
