"""A heading's own anchor, written after it, as a renderer reads it: not shown.

Docusaurus, Pandoc, kramdown (Jekyll), Hugo and MkDocs' ``attr_list`` let a page fix a
heading's anchor as ``## 相关配置 {#basic-configuration}`` so that links survive a
translation or a rename; Apache APISIX's Chinese docs do it for 62 headings. A renderer
shows "相关配置"; read as text, the braces were in every heading path, every quote's
heading and the title of a page whose first heading carried one.
"""

from __future__ import annotations

import re

from superbiz.knowledge.formats._markdown import lines_outside_code

#: an ATX heading's trailing attribute list: ``{#id}``, ``{: #id}``, ``{#id .class}``,
#: ``{.unnumbered}``; its text before it (group 1)
_ATTRIBUTES = re.compile(r"^([ \t]{0,3}#{1,6}[ \t]+.*?\S)[ \t]+\{:?[ \t]*[#.][^{}]*\}[ \t]*$")


def heading_ids_dropped(markdown: str) -> str:
    """``markdown`` without the attribute lists its headings end in, outside code.

    >>> heading_ids_dropped("## 相关配置 {#basic-configuration}\\n\\ntext {#kept}")
    '## 相关配置\\n\\ntext {#kept}'
    >>> heading_ids_dropped("# Install {: #install .wide }"), heading_ids_dropped("# {#only}")
    ('# Install', '# {#only}')
    >>> heading_ids_dropped("```md\\n## Kept {#as-written}\\n```")
    '```md\\n## Kept {#as-written}\\n```'
    """
    if "{" not in markdown:
        return markdown
    return lines_outside_code(markdown, lambda line: _ATTRIBUTES.sub(r"\1", line))
