"""Admonitions of the Markdown site generators written as quotes under their title.

Runbooks kept in MkDocs wrap their warnings in ``!!!`` (or a collapsible ``???``) with the
text indented under it. Markdown reads that text as an indented code block: the page
showed a warning as code, and a quote began with ``!!! danger``. Docusaurus and VitePress
fence theirs in colons (``:::tip 提示`` … ``:::``): the fence lines were read as text, so a
quote began ":::tip". GitHub marks a quote as an alert by its first line (``> [!WARNING]``),
and Obsidian as a callout (``> [!faq]- Why is it slow?``), which they show as its title; read
as text, a quote began "[!WARNING]". All are written as the reStructuredText and MyST notes are
(``formats._directives``, ``formats._myst``): a quote under its title.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from superbiz.knowledge.formats._markdown import (
    closes_fence,
    fence_after,
    lines_outside_code,
    quoted,
    without_blank_ends,
)

#: ``!!! type``, ``??? type`` or ``???+ type``, with an optional ``"title"`` ("" for none)
_OPEN = re.compile(r'^(?:!!!|\?\?\?\+?)[ \t]+(?P<kind>[\w-]+)(?:[ \t]+"(?P<title>[^"]*)")?[ \t]*$')
_INDENT = ("    ", "\t")
#: ``:::tip``, ``:::tip Title``, ``:::tip[Title]`` (Docusaurus), ``::: danger STOP``
#: (VitePress); a name in braces is MyST's (``formats._myst``)
_COLON_OPEN = re.compile(
    r"^[ \t]{0,3}(?P<fence>:{3,})[ \t]*(?P<kind>[A-Za-z][\w-]*)"
    r"(?:\[(?P<bracketed>[^\]]*)\]|[ \t]+(?P<title>[^:\s][^\n]*?))?[ \t]*:*[ \t]*$"
)
#: the kinds Docusaurus and VitePress draw as a box under a title; another name (a
#: Pandoc div's class, a theme's own container) keeps its text without a title
_COLON_KINDS = frozenset("caution danger details important info note tip warning".split())


def mkdocs_admonitions_as_quotes(markdown: str) -> str:
    """``markdown`` with each MkDocs admonition written as a quote under its title.

    >>> mkdocs_admonitions_as_quotes('!!! warning "Quorum"\\n    Restart one node at a time.\\n')
    '> **Quorum**\\n> Restart one node at a time.\\n'
    >>> mkdocs_admonitions_as_quotes("```\\n!!! note\\n    code\\n```")
    '```\\n!!! note\\n    code\\n```'
    """
    if "!!!" not in markdown and "???" not in markdown:
        return markdown
    return "\n".join(_rewritten(markdown.split("\n"), _mkdocs_block))


def colon_admonitions_as_quotes(markdown: str) -> str:
    """``markdown`` with each Docusaurus or VitePress admonition written as a quote under
    its title; a container of another name keeps its text, without the fences.

    >>> colon_admonitions_as_quotes(":::tip 提示\\n\\n先备份。\\n\\n:::\\n")
    '> **提示**\\n> 先备份。\\n'
    >>> colon_admonitions_as_quotes("::: warning\\nDrain first.\\n:::")
    '> **Warning**\\n> Drain first.'
    """
    if ":::" not in markdown:
        return markdown
    lines = markdown.split("\n")
    return "\n".join(_rewritten(lines, _colon_blocks(lines)))


#: the first line of a GitHub alert (``> [!NOTE]``) or an Obsidian callout (``> [!faq]-
#: Why is it slow?``: any kind, folded or not, a title or none)
_ALERT = re.compile(
    r"^(?P<quote>[ \t]{0,3}>[ \t]?)[ \t]*\[!(?P<kind>[A-Za-z][\w-]*)\][+-]?"
    r"(?:[ \t]+(?P<title>\S.*?))?[ \t]*$"
)


def github_alerts_as_quotes(markdown: str) -> str:
    """``markdown`` with each GitHub alert's or Obsidian callout's marker written as its
    title, as they show it, outside code.

    >>> github_alerts_as_quotes("> [!WARNING]\\n> Drain the node first.")
    '> **Warning**\\n> Drain the node first.'
    >>> github_alerts_as_quotes("> [!warning]- 版本差异与坑点\\n> 没有安全的重命名命令。")
    '> **版本差异与坑点**\\n> 没有安全的重命名命令。'
    >>> github_alerts_as_quotes("```md\\n> [!NOTE]\\n```")
    '```md\\n> [!NOTE]\\n```'
    """
    if "[!" not in markdown:
        return markdown
    return lines_outside_code(markdown, lambda line: _ALERT.sub(_alert_title, line))


def _alert_title(marker: re.Match[str]) -> str:
    return f"{marker['quote']}**{marker['title'] or marker['kind'].capitalize()}**"


#: what a block opening at a line stands for: (the line after it, its lines), or None
Block = Callable[[list[str], int], tuple[int, list[str]] | None]


def _rewritten(lines: list[str], block: Block) -> list[str]:
    """``lines`` with each block ``block`` finds at a line outside code written as it says."""
    out: list[str] = []
    number, fence = 0, None
    while number < len(lines):
        found = None if fence else block(lines, number)
        if found is None:
            fence = fence_after(lines[number], fence)
            out.append(lines[number])
            number += 1
            continue
        number, written = found
        out.extend(written)
    return out


def _colon_blocks(page: list[str]) -> Block:
    """The colon admonitions of ``page``: each opening's block, or None when nothing
    closes it (it is text). Where the last line that could close a fence of its length
    lies is found once per length, so a page of openings never closed is read in linear
    time rather than scanned to its end from each."""
    last: dict[int, int] = {}

    def block(lines: list[str], number: int) -> tuple[int, list[str]] | None:
        opening = _COLON_OPEN.match(lines[number])
        if opening is None:
            return None
        fence = opening["fence"]
        if len(fence) not in last:
            ends = (i for i in range(len(page) - 1, -1, -1) if closes_fence(page[i], fence))
            last[len(fence)] = next(ends, -1)
        end = _colon_close(lines, number + 1, fence) if last[len(fence)] > number else None
        if end is None:
            return None
        inner = lines[number + 1 : end]
        body = without_blank_ends(_rewritten(inner, _colon_blocks(inner)))
        kind = opening["kind"].lower()
        title = opening["bracketed"] if opening["bracketed"] is not None else opening["title"]
        title = " ".join((title or "").split()) or kind.capitalize()
        return end + 1, quoted([f"**{title}**", *body]) if kind in _COLON_KINDS else body

    return block


def _colon_close(lines: list[str], start: int, fence: str) -> int | None:
    """The line that closes a colon fence opened just before ``start``, outside the code
    blocks in it; None when none does."""
    code = None
    for number in range(start, len(lines)):
        if code is None and closes_fence(lines[number], fence):
            return number
        code = fence_after(lines[number], code)
    return None


def _mkdocs_block(lines: list[str], number: int) -> tuple[int, list[str]] | None:
    """A MkDocs admonition opening at ``number``: its indented text, blank lines after it
    left to the document."""
    opening = _OPEN.match(lines[number])
    if opening is None:
        return None
    end = number + 1
    while end < len(lines) and (not lines[end].strip() or lines[end].startswith(_INDENT)):
        end += 1
    while end > number + 1 and not lines[end - 1].strip():
        end -= 1
    body = _rewritten([_dedent(line) for line in lines[number + 1 : end]], _mkdocs_block)
    title = opening["title"]
    heading = [] if title == "" else [f"**{title or opening['kind'].capitalize()}**"]
    return end, quoted([*heading, *body])


def _dedent(line: str) -> str:
    return line[1:] if line.startswith("\t") else line[4:] if line.startswith("    ") else line
