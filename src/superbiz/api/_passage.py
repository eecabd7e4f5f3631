"""Where a cited passage sits in its document: pure functions, no I/O."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from superbiz.knowledge.documents.chunking import split_sections

#: characters of the passage's start looked for in the document's sections
_PROBE = 60


def heading_path(body: str, excerpt: str) -> list[str]:
    """The headings above ``excerpt`` in ``body``: the section holding the passage's
    first line that is not a heading, else the headings the excerpt itself carries.

    >>> doc = "# Guide\\n\\nintro\\n\\n## Tax id\\n\\nCheck the 18 digits.\\n"
    >>> heading_path(doc, "## Tax id\\n\\nCheck the 18 digits.")
    ['Guide', 'Tax id']
    >>> heading_path("no headings", "## Alone\\ntext")
    ['Alone']
    """
    probe = _first_text_line(excerpt)[:_PROBE]
    if probe:
        for section in split_sections(body):
            if probe in section.text:
                return list(section.heading_path)
    return [
        line.lstrip("#").strip()
        for line in excerpt.splitlines()
        if line.startswith("#") and line.lstrip("#").startswith(" ")
    ]


def _first_text_line(text: str) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            return line.rstrip("…")
    return ""


def level_of(path: str, turn: int, invocations: Iterable[Mapping[str, Any]]) -> str | None:
    """The relevance level of the lookup that showed ``path``: in ``turn`` if one did,
    else the latest earlier one (evidence carried over from an earlier turn).

    >>> calls = [{"turn": 1, "relevance_level": "PRECISE", "shown": ["a.md"]},
    ...          {"turn": 2, "relevance_level": "REFERENCE", "shown": ["b.md"]}]
    >>> level_of("a.md", 2, calls), level_of("b.md", 2, calls), level_of("c.md", 2, calls)
    ('PRECISE', 'REFERENCE', None)
    """
    best: tuple[int, str] | None = None
    for call in invocations:
        if path not in (call.get("shown") or ()) or call["turn"] > turn:
            continue
        level = call.get("relevance_level")
        if level and (best is None or call["turn"] > best[0]):
            best = (call["turn"], level)
    return best[1] if best else None
