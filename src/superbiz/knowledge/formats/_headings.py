"""Headings as a renderer shows them: without the anchor written after them, and none
where nothing would show.

**Anchors.** Docusaurus, Pandoc, kramdown (Jekyll), Hugo and MkDocs' ``attr_list`` let a
page fix a heading's anchor as ``## 相关配置 {#basic-configuration}`` so that links survive
a translation or a rename; Apache APISIX's Chinese docs do it for 62 headings. A renderer
shows "相关配置"; read as text, the braces were in every heading path, every quote's
heading and the title of a page whose first heading carried one.

**Headings with nothing to show.** Docsify sites hide a page's heading as ``# &nbsp;``
(Apollo's deployment guides open so): a renderer shows a blank line, and read as text it
was the page's title, "&nbsp;", in every quote of the page.
"""

from __future__ import annotations

import html
import re

from superbiz.knowledge.formats._markdown import lines_outside_code

#: an ATX heading's trailing attribute list: ``{#id}``, ``{: #id}``, ``{#id .class}``,
#: ``{.unnumbered}``; its text before it (group 1)
_ATTRIBUTES = re.compile(r"^([ \t]{0,3}#{1,6}[ \t]+.*?\S)[ \t]+\{:?[ \t]*[#.][^{}]*\}[ \t]*$")
#: an ATX heading, its text (group 1) without the closing ``#`` marks
_HEADING = re.compile(r"^[ \t]{0,3}#{1,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")


def headings_as_shown(markdown: str) -> str:
    """``markdown`` without the attribute lists its headings end in, and without its
    headings that show nothing (entities of white space, ``<br>``), outside code.

    >>> headings_as_shown("## 相关配置 {#basic-configuration}\\n\\ntext {#kept}")
    '## 相关配置\\n\\ntext {#kept}'
    >>> headings_as_shown("# Install {: #install .wide }"), headings_as_shown("# {#only}")
    ('# Install', '# {#only}')
    >>> headings_as_shown("# &nbsp;\\n# 一、准备工作")
    '# 一、准备工作'
    >>> headings_as_shown("```md\\n## Kept {#as-written}\\n# &nbsp;\\n```")
    '```md\\n## Kept {#as-written}\\n# &nbsp;\\n```'
    """
    if "{" not in markdown and "&" not in markdown and "<" not in markdown:
        return markdown
    return lines_outside_code(markdown, _as_shown)


def _as_shown(line: str) -> str | None:
    heading = _HEADING.match(line)
    if heading is None:
        return line
    if not shows_text(heading.group(1) or ""):
        return None
    return _ATTRIBUTES.sub(r"\1", line)


_TAG = re.compile(r"<[^>]*>")


def shows_text(text: str) -> bool:
    """Whether ``text`` shows anything once its entities and tags are read.

    >>> shows_text("&nbsp;"), shows_text("<br/>&emsp;"), shows_text("&lt;br&gt;")
    (False, False, True)
    """
    return bool(html.unescape(_TAG.sub("", text)).strip())
