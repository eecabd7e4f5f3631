"""Hugo's shortcodes, which a page's renderer replaces and a reader of its text should not
see.

TiDB's and Flink's docs put ``{{< copyable "shell-regular" >}}`` above each command (a
copy button) and wrap notes in ``{{< hint info >}}`` … ``{{< /hint >}}``. Read as text,
a quote showed those lines between a step and its command. A line that is one shortcode
and nothing else (``{{< … >}}`` or ``{{% … %}}``) goes; the text between a pair of them
stays, as the page shows it. A shortcode inside a line, or inside code (a page about
Hugo), is kept as written.
"""

from __future__ import annotations

import re

from superbiz.knowledge.formats._markdown import lines_outside_code

_SHORTCODE_LINE = re.compile(r"^[ \t]*\{\{(?:<[^\n]*?>|%[^\n]*?%)\}\}[ \t]*$")


def shortcode_lines_dropped(markdown: str) -> str:
    """``markdown`` without its lines that are one Hugo shortcode each, outside code.

    >>> shortcode_lines_dropped('1. Check:\\n    {{< copyable "shell-regular" >}}\\n    tiup -v')
    '1. Check:\\n\\n    tiup -v'
    >>> shortcode_lines_dropped("{{< hint info >}}\\nDrain first.\\n{{< /hint >}}")
    '\\nDrain first.\\n'
    >>> shortcode_lines_dropped("```\\n{{< copyable >}}\\n```\\nSee {{< ref x >}}.")
    '```\\n{{< copyable >}}\\n```\\nSee {{< ref x >}}.'
    """
    if "{{" not in markdown:
        return markdown
    return lines_outside_code(markdown, lambda line: "" if _SHORTCODE_LINE.match(line) else line)
