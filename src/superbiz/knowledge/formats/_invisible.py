"""What a Markdown page shows as nothing: HTML comments and empty anchors.

Projects keep their licence header (every Apache project's docs), generator metadata
(Node.js's ``<!-- YAML added: v14.11.0 -->``) and commented-out drafts in HTML comments,
and mark old link targets with ``<a id="…"></a>``. A renderer shows none of it; read as
text, a licence became a document's when-to-retrieve line on the planner's map, and
quotes began with ``<!-- YAML``. A comment opening a line runs to the line that closes
it, code fences inside it included, as CommonMark reads an HTML block; one inside a line
goes alone. Code (fenced blocks, backtick spans) is never touched, and a comment never
closed stays as written.
"""

from __future__ import annotations

import re
from bisect import bisect_left

from superbiz.knowledge.formats._markdown import fence_after

_BLOCK_OPEN = re.compile(r"^[ \t]{0,3}<!--")
_CLOSE = "-->"
#: a comment closed on its line, or an anchor with nothing in it
_INLINE = re.compile(
    r"<!--.*?-->|<a\s+(?:id|name)\s*=\s*(?:\"[^\"]*\"|'[^']*')\s*>\s*</a>", re.IGNORECASE
)
#: a backtick code span: its text is code, whatever it holds
_CODE_SPAN = re.compile(r"(`+).+?\1")


def invisible_html_dropped(markdown: str) -> str:
    """``markdown`` without its HTML comments and empty anchors, outside code.

    >>> invisible_html_dropped("<!--\\nLicensed to ASF\\n-->\\n# Setup\\nRun it.<!-- to do -->")
    '\\n# Setup\\nRun it.'
    >>> invisible_html_dropped("Write `<!-- x -->` to hide x.\\n```html\\n<!-- kept -->\\n```")
    'Write `<!-- x -->` to hide x.\\n```html\\n<!-- kept -->\\n```'
    """
    if "<!--" not in markdown and "<a" not in markdown.lower():
        return markdown
    lines = markdown.split("\n")
    # the lines a comment can close on, looked up rather than scanned for: a page of
    # openings never closed is read in linear time
    closing = [number for number, line in enumerate(lines) if _CLOSE in line]
    out: list[str] = []
    number, fence = 0, None
    while number < len(lines):
        line = lines[number]
        if fence is None and _BLOCK_OPEN.match(line):
            at = bisect_left(closing, number)
            end = closing[at] if at < len(closing) else None
            if end is not None:
                rest = lines[end].split(_CLOSE, 1)[1]
                out.append(_inline_dropped(rest) if rest.strip() else "")
                number = end + 1
                continue
        out.append(line if fence is not None else _inline_dropped(line))
        fence = fence_after(line, fence)
        number += 1
    return "\n".join(out)


def _inline_dropped(line: str) -> str:
    """``line`` without the comments and empty anchors outside its code spans."""
    if "<" not in line:
        return line
    kept, at = [], 0
    for span in _CODE_SPAN.finditer(line):
        kept += [_INLINE.sub("", line[at : span.start()]), span.group()]
        at = span.end()
    kept.append(_INLINE.sub("", line[at:]))
    return "".join(kept)
