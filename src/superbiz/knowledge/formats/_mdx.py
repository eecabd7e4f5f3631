"""MDX's JavaScript in a Markdown page: the imports and comments a renderer runs or hides.

Docusaurus reads every page as MDX (``.mdx``, and ``.md`` since its version 2): a page
that shows tabs opens with ``import Tabs from '@theme/Tabs';``, and authors hide notes in
``{/* … */}``. Read as text, SeaTunnel's deployment guide (dev2) began with its two
imports, and so did its first chunk and the opening the map derives from it. An
``import`` statement on a line of its own and a ``{/* … */}`` comment (on its lines, or
inside a line) go; code (fenced blocks) is never touched, and a comment never closed
stays as written.
"""

from __future__ import annotations

import re

from superbiz.knowledge.formats._markdown import fence_after

#: ``import X from 'module';``, ``import {A, B} from "module"``, ``import 'style.css';``
_IMPORT = re.compile(r"import[ \t]+(?:[\w*{}, \t]+?[ \t]from[ \t]+)?(?:'[^'\n]+'|\"[^\"\n]+\")")
#: an import statement is short: a longer line is text (and no regular expression runs
#: over a page-long line)
_IMPORT_CHARS = 300
_OPEN, _CLOSE = "{/*", "*/}"


def mdx_scripts_dropped(markdown: str) -> str:
    """``markdown`` without its MDX import lines and ``{/* … */}`` comments, outside code.

    >>> mdx_scripts_dropped("import Tabs from '@theme/Tabs';\\n\\n# 部署{/* draft */}\\nRun it.")
    '\\n# 部署\\nRun it.'
    >>> mdx_scripts_dropped("{/*\\nTODO: MariaDB\\n*/}\\nText.\\n```js\\nimport x from 'y'\\n```")
    "\\nText.\\n```js\\nimport x from 'y'\\n```"
    """
    if "import" not in markdown and "{/*" not in markdown:
        return markdown
    out: list[str] = []
    prose: list[str] = []  # the lines outside code since the last code block
    fence = None
    for line in markdown.split("\n"):
        after = fence_after(line, fence)
        if fence is None and after is None:
            prose.append(line)
        else:
            out.extend(_prose_dropped(prose))
            prose = []
            out.append(line)
        fence = after
    out.extend(_prose_dropped(prose))
    return "\n".join(out)


def _prose_dropped(lines: list[str]) -> list[str]:
    """Lines outside code without their import statements and comments."""
    if not lines:
        return []
    text = "\n".join(line for line in lines if not _import(line))
    return _comments_dropped(text).split("\n")


def _import(line: str) -> bool:
    return len(line) <= _IMPORT_CHARS and _IMPORT.fullmatch(line.rstrip(" \t;")) is not None


def _comments_dropped(text: str) -> str:
    """``text`` without its ``{/* … */}`` comments, in one pass: an opening never closed
    stays, and so does the rest of the text after it (a page of openings is linear)."""
    kept, at = [], 0
    while (start := text.find(_OPEN, at)) >= 0:
        end = text.find(_CLOSE, start + len(_OPEN))
        if end < 0:
            break
        kept.append(text[at:start])
        at = end + len(_CLOSE)
    kept.append(text[at:])
    return "".join(kept)
