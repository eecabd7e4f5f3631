"""Hugo's shortcodes, which a page's renderer replaces and a reader of its text should not
see.

TiDB's and Flink's docs put ``{{< copyable "shell-regular" >}}`` above each command (a
copy button) and wrap notes in ``{{< hint info >}}`` … ``{{< /hint >}}``; the Prometheus
runbooks link their siblings as ``[Node RAID Degraded]({{< ref "./NodeRAIDDegraded.md"
>}})``. Read as text, a quote showed those lines between a step and its command, and the
links' targets as shortcodes. A line that is one shortcode and nothing else (``{{< … >}}``
or ``{{% … %}}``) goes, the text between a pair of them stays, and a ``ref`` or
``relref`` target is the page it names, as the page shows them. Any other shortcode
inside a line, and any inside code (a page about Hugo), is kept as written.
"""

from __future__ import annotations

import re

from superbiz.knowledge.formats._markdown import lines_outside_code

_SHORTCODE_LINE = re.compile(r"^[ \t]*\{\{(?:<[^\n]*?>|%[^\n]*?%)\}\}[ \t]*$")
#: a link target that is Hugo's ``ref`` or ``relref`` of a page, the page as group 1
_REF_TARGET = re.compile(r"\]\(\{\{[<%]\s*(?:rel)?ref\s+\"([^\"]+)\"\s*[>%]\}\}\)")


def shortcodes_as_rendered(markdown: str) -> str:
    """``markdown`` without its lines that are one Hugo shortcode each, and with its
    links' ``ref`` targets as the pages they name, outside code.

    >>> shortcodes_as_rendered('1. Check:\\n    {{< copyable "shell-regular" >}}\\n    tiup -v')
    '1. Check:\\n\\n    tiup -v'
    >>> shortcodes_as_rendered("{{< hint info >}}\\nDrain first.\\n{{< /hint >}}")
    '\\nDrain first.\\n'
    >>> shortcodes_as_rendered('See [RAID]({{< ref "./NodeRAIDDegraded.md" >}}).')
    'See [RAID](./NodeRAIDDegraded.md).'
    >>> shortcodes_as_rendered("```\\n{{< copyable >}}\\n```\\nSee {{< ref x >}}.")
    '```\\n{{< copyable >}}\\n```\\nSee {{< ref x >}}.'
    """
    if "{{" not in markdown:
        return markdown
    return lines_outside_code(markdown, _rendered)


def _rendered(line: str) -> str:
    if _SHORTCODE_LINE.match(line):
        return ""
    return _REF_TARGET.sub(r"](\1)", line) if "{{" in line else line
