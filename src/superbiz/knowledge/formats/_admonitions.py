"""MkDocs' admonitions (Python-Markdown's ``!!! warning "Title"``) written as quotes.

Runbooks kept in MkDocs wrap their warnings in ``!!!`` (or a collapsible ``???``) with the
text indented under it. Markdown reads that text as an indented code block: the page
showed a warning as code, and a quote began with ``!!! danger``. It is written as the
reStructuredText and MyST notes are (``formats._directives``, ``formats._myst``): a quote
under its title.
"""

from __future__ import annotations

import re

from superbiz.knowledge.formats._markdown import CODE_FENCE, closes_fence, quoted

#: ``!!! type``, ``??? type`` or ``???+ type``, with an optional ``"title"`` ("" for none)
_OPEN = re.compile(r'^(?:!!!|\?\?\?\+?)[ \t]+(?P<kind>[\w-]+)(?:[ \t]+"(?P<title>[^"]*)")?[ \t]*$')
_INDENT = ("    ", "\t")


def mkdocs_admonitions_as_quotes(markdown: str) -> str:
    """``markdown`` with each MkDocs admonition written as a quote under its title.

    >>> mkdocs_admonitions_as_quotes('!!! warning "Quorum"\\n    Restart one node at a time.\\n')
    '> **Quorum**\\n> Restart one node at a time.\\n'
    >>> mkdocs_admonitions_as_quotes("```\\n!!! note\\n    code\\n```")
    '```\\n!!! note\\n    code\\n```'
    """
    if "!!!" not in markdown and "???" not in markdown:
        return markdown
    return "\n".join(_lines(markdown.split("\n")))


def _lines(lines: list[str]) -> list[str]:
    out: list[str] = []
    number, fence = 0, None
    while number < len(lines):
        line = lines[number]
        opening = None if fence else _OPEN.match(line)
        if opening is None:
            if fence is None and (plain := CODE_FENCE.match(line)):
                fence = plain.group(1)
            elif fence is not None and closes_fence(line, fence):
                fence = None
            out.append(line)
            number += 1
            continue
        end = number + 1
        while end < len(lines) and (not lines[end].strip() or lines[end].startswith(_INDENT)):
            end += 1
        while end > number + 1 and not lines[end - 1].strip():
            end -= 1  # blank lines after the text are the document's
        body = _lines([_dedent(line) for line in lines[number + 1 : end]])
        title = opening["title"]
        heading = [] if title == "" else [f"**{title or opening['kind'].capitalize()}**"]
        out.extend(quoted([*heading, *body]))
        number = end
    return out


def _dedent(line: str) -> str:
    return line[1:] if line.startswith("\t") else line[4:] if line.startswith("    ") else line
