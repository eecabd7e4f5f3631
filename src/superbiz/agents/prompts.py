"""Prompts are Markdown files shipped inside the package, one per language.

Every prompt must exist in every language with the same ``{placeholders}``; this is
checked when the module is first imported, as the message tables are.
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable

from superbiz._messages import LANGUAGES, check_languages
from superbiz._text import Language
from superbiz.exceptions import ConfigError

__all__ = ["load_prompt", "load_prompts"]


def load_prompts(directory: Traversable) -> dict[Language, dict[str, str]]:
    """``<name>.<language>.md`` files by language and name, checked across languages."""
    tables: dict[Language, dict[str, str]] = {language: {} for language in LANGUAGES}
    for entry in directory.iterdir():
        if not entry.name.endswith(".md"):
            continue
        stem = entry.name.removesuffix(".md")
        language = next((lang for lang in LANGUAGES if stem.endswith(f".{lang}")), None)
        if language is None:
            raise ConfigError(f"prompt {entry.name} names no known language {LANGUAGES}")
        tables[language][stem.removesuffix(f".{language}")] = entry.read_text(encoding="utf-8")
    check_languages(tables, "prompts")
    return tables


_PROMPTS = load_prompts(resources.files("superbiz.agents") / "prompts")


def load_prompt(name: str, language: Language) -> str:
    """``load_prompt("chat-executor-prompt", "zh")`` is ``prompts/chat-executor-prompt.zh.md``."""
    try:
        return _PROMPTS[language][name]
    except KeyError:
        raise KeyError(
            f"no prompt {name!r}; known: {', '.join(sorted(_PROMPTS[language]))}"
        ) from None
