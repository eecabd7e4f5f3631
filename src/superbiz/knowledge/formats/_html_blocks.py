"""HTML a Markdown page uses for its structure, written as Markdown: headings and
collapsible sections.

**Headings.** Docs sites write a FAQ's questions as ``<h4 id="3.11">Weights are
ignored</h4>`` so that each keeps a stable anchor (Nacos' FAQ holds 30 of them), and
READMEs centre theirs in ``<h2 align="center">``. A renderer shows a heading; read as
text, the whole FAQ was one section, so its chunks ran across questions and the answer to
"weights are ignored" had no heading to be found or quoted under. A heading element that
opens a line is rewritten as ``#`` × its level and its text, its tags dropped and its
entities decoded; one that spans lines is read to its closing tag within its paragraph.
An element with no text (a logo) stays as written.

**Collapsible sections.** GitHub READMEs and TiDB's docs fold each case of a
troubleshooting page into ``<details><summary>Deployed with TiUP</summary> … </details>``.
A renderer shows the summary as the section's label and its text when opened; read as
text, a quote began with ``<details>`` and ``<summary>`` tags. The summary becomes a bold
line (``**Deployed with TiUP**``), the tags that open and close the section go.

Code (fenced blocks) is never touched.
"""

from __future__ import annotations

import html
import re

from superbiz.knowledge.formats._markdown import fence_after, heading, inline, lines_outside_code

_OPEN = re.compile(r"^[ \t]{0,3}<h([1-6])(?:\s[^>]*)?>", re.IGNORECASE)
#: a line that opens or closes a collapsible section, its summary (group 1) on it or not
_DETAILS = re.compile(
    r"^[ \t]*(?:</details\s*>|<details(?:\s[^>]*)?>"
    r"(?:[ \t]*<summary(?:\s[^>]*)?>(.*?)</summary\s*>)?)[ \t]*$",
    re.IGNORECASE,
)
#: a summary on a line of its own
_SUMMARY = re.compile(r"^[ \t]*<summary(?:\s[^>]*)?>(.*?)</summary\s*>[ \t]*$", re.IGNORECASE)
_TAG = re.compile(r"<[^>]*>")
#: a line of HTML tags and Markdown images and nothing else: ``<p align="center">``, ``<img
#: src=… />``, ``</div>``, ``![Acknowledging](../img/ack.png)``, a badge ``[![CI](b.svg)](u)``
_LAYOUT_ONLY = re.compile(
    r"^[ \t]*(?:(?:</?[A-Za-z][^>]*>|!\[[^\]\n]*\]\([^)\n]*\)"
    r"|\[!\[[^\]\n]*\]\([^)\n]*\)\]\([^)\n]*\))[ \t]*)+$"
)
#: lines a heading element may span before its closing tag (a paragraph's worth)
_MAX_LINES = 8


def html_headings_as_markdown(markdown: str) -> str:
    """``markdown`` with each HTML heading element that opens a line written as a
    Markdown heading, outside code.

    >>> html_headings_as_markdown('<h4 id="3.11">Nacos权重不生效</h4>\\n\\n检查权重。')
    '#### Nacos权重不生效\\n\\n检查权重。'
    >>> html_headings_as_markdown('<H2 align="center">\\n  Tom &amp; <code>Jerry</code>\\n</H2>')
    '## Tom & Jerry'
    >>> html_headings_as_markdown('```html\\n<h1>kept</h1>\\n```')
    '```html\\n<h1>kept</h1>\\n```'
    """
    if "<h" not in markdown and "<H" not in markdown:
        return markdown
    lines = markdown.split("\n")
    out: list[str] = []
    number, fence = 0, None
    while number < len(lines):
        line = lines[number]
        opening = _OPEN.match(line) if fence is None else None
        element = _element(lines, number, opening.group(1)) if opening else None
        if element is None:
            out.append(line)
            fence = fence_after(line, fence)
            number += 1
            continue
        level, text, rest, number = element
        out.append(heading(level, text))
        if rest.strip():
            out.append(rest)
    return "\n".join(out)


def _element(lines: list[str], start: int, level: str) -> tuple[int, str, str, int] | None:
    """``(level, text, what follows the closing tag, the next line's number)`` of the
    heading element opening at ``lines[start]``; None when it does not close within its
    paragraph or holds no text."""
    closing = re.compile(rf"</h{level}\s*>", re.IGNORECASE)
    parts: list[str] = []
    for number in range(start, min(start + _MAX_LINES, len(lines))):
        line = lines[number]
        if number > start and not line.strip():
            return None
        found = closing.search(line)
        if found is None:
            parts.append(line)
            continue
        parts.append(line[: found.start()])
        text = _text(" ".join(parts))
        if not text:
            return None
        return int(level), text, line[found.end() :], number + 1
    return None


def collapsible_sections_opened(markdown: str) -> str:
    """``markdown`` with each ``<details>`` section's summary as a bold line and the tags
    that open and close it dropped, outside code.

    >>> collapsible_sections_opened("<details>\\n <summary>TiUP</summary>\\n\\n检查。\\n</details>")
    '\\n**TiUP**\\n\\n检查。\\n'
    >>> collapsible_sections_opened("<details><summary>Logs &amp; traces</summary>\\nRead them.")
    '**Logs & traces**\\nRead them.'
    """
    if "<details" not in markdown.lower():
        return markdown
    return lines_outside_code(markdown, _opened)


def _opened(line: str) -> str:
    """A line that opens or closes a collapsible section as a reader sees it: its
    summary as a bold line, else nothing; any other line as it is."""
    match = _DETAILS.match(line) or _SUMMARY.match(line)
    if match is None:
        return line
    label = _text(match.group(1) or "")
    return f"**{label}**" if label else ""


def layout_lines_dropped(markdown: str) -> str:
    """``markdown`` without its lines of HTML tags and images alone, outside code: the
    wrappers a README centres a logo in, the logo itself, ``<br>`` and ``</div>`` lines, a
    screenshot's ``![…](…)``. A quote in text cannot show a picture or a layout, and
    showed their markup instead (7 of dev2's 355 answers began with a DolphinScheduler
    FAQ's ``<p align="center">``; PagerDuty's training course, with each slide's
    ``<label>![056](../../assets/slides/….jpeg)</label>``). An image inside a sentence
    stays: the sentence is text.

    >>> layout_lines_dropped('Q：告警\\n<p align="center">\\n <img src="a.png" />\\n</p>\\nA')
    'Q：告警\\nA'
    >>> layout_lines_dropped("Don't ack.\\n\\n![Ack](../img/ack.png)\\n\\nSee ![icon](i.png) here.")
    "Don't ack.\\n\\n\\nSee ![icon](i.png) here."
    >>> layout_lines_dropped("Press <kbd>Ctrl</kbd>.\\n```html\\n<br>\\n```")
    'Press <kbd>Ctrl</kbd>.\\n```html\\n<br>\\n```'
    """
    if "<" not in markdown and "![" not in markdown:
        return markdown
    return lines_outside_code(markdown, lambda line: None if _LAYOUT_ONLY.match(line) else line)


def _text(markup: str) -> str:
    """The text of an element's inner markup: tags dropped, entities decoded, one line."""
    return inline(html.unescape(_TAG.sub("", markup)))
