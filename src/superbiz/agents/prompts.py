"""Prompts are Markdown files shipped inside the package, one per language."""

from __future__ import annotations

from functools import cache
from importlib import resources

from superbiz._text import Language


@cache
def load_prompt(name: str, language: Language) -> str:
    """``load_prompt("chat-executor-prompt", "zh")`` reads
    ``prompts/chat-executor-prompt.zh.md``."""
    path = resources.files("superbiz.agents") / "prompts" / f"{name}.{language}.md"
    return path.read_text(encoding="utf-8")
