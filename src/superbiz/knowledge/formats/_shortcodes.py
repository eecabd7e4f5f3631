"""Hugo's shortcodes, which a page's renderer replaces and a reader of its text should not
see.

TiDB's and Flink's docs put ``{{< copyable "shell-regular" >}}`` above each command (a
copy button) and wrap notes in ``{{< hint info >}}`` … ``{{< /hint >}}``; the Prometheus
runbooks link their siblings as ``[Node RAID Degraded]({{< ref "./NodeRAIDDegraded.md"
>}})``; Kubernetes' docs name their terms as ``{{< glossary_tooltip text="Pods"
term_id="pod" >}}`` in nearly every sentence and head their sections ``## {{% heading
"prerequisites" %}}``. Read as text, a quote showed those lines between a step and its
command, the links' targets as shortcodes and the terms as markup. A line that is one
shortcode and nothing else (``{{< … >}}`` or ``{{% … %}}``) goes, the text between a pair
of them stays (a callout's under its label, "**Note:**"), a code example is the file it
shows, a ``ref`` or ``relref`` target is the page it names, a term is its text, a section
heading its words, and any other shortcode inside a line goes (a version number a site's
build fills in), as the page shows them. Code, fenced or in a code span (a page about
Hugo), is kept as written.

Those are what a page shows, for a quote; a block of code written as a shortcode is what
a page is, for every reader: Istio's docs write each command as ``{{< text bash >}}`` …
``{{< /text >}}`` and Hugo's own ``highlight`` does the same, so ``code_shortcodes_as_fences``
turns them into the fenced blocks they render as before the page is read (a ``# comment``
in one had been read as a heading, and ``<pod-name>`` as a tag).
"""

from __future__ import annotations

import bisect
import re
from functools import partial

from superbiz._markdown import fenced
from superbiz._text import detect_language
from superbiz.knowledge.formats._markdown import lines_outside_code

#: a shortcode: its closing slash if any, its name, its arguments as written (no braces, at
#: most 500 characters: a line of unclosed openers costs a short scan each)
_SHORTCODE = re.compile(
    r"\{\{[<%][ \t]*(?P<closing>/)?[ \t]*(?P<name>[\w.-]+)(?P<args>[^\n{}]{0,500}?)[ \t]*[>%]\}\}"
)
#: a line that is one shortcode (not two: ``{{< note >}}Drain first.{{< /note >}}``)
_SHORTCODE_LINE = re.compile(r"^[ \t]*\{\{[<%](?:(?!\}\})[^\n])*[>%]\}\}[ \t]*$")
#: a link target that is Hugo's ``ref`` or ``relref`` of a page, the page as group 1
_REF_TARGET = re.compile(r"\]\(\{\{[<%]\s*(?:rel)?ref\s+\"([^\"]+)\"\s*[>%]\}\}\)")
#: a code span, left as written
_CODE_SPAN = re.compile(r"(`+)[^`\n]*?\1")
_TEXT_ARG = re.compile(r"\btext=\"([^\"]*)\"")
_TITLE_ARG = re.compile(r"\btitle=\"([^\"]*)\"")
_TERM_ARG = re.compile(r"\bterm_id=\"([^\"]*)\"")
_FIRST_ARG = re.compile(r"^[ \t]*\"?([\w-]+)\"?")
_FILE_ARG = re.compile(r"\bfile=\"([^\"]+)\"")
_VERSION_ARG = re.compile(r"\bfor_k8s_version=\"([^\"]+)\"")
_STATE_ARG = re.compile(r"\bstate=\"([^\"]+)\"")
#: callouts, by the name of their shortcode (Kubernetes', Docsy's ``alert``, the Book
#: theme's ``hint``), and the label each shows
_CALLOUTS = {
    "note": "Note",
    "tip": "Tip",
    "info": "Info",
    "caution": "Caution",
    "warning": "Warning",
    "danger": "Danger",
    "important": "Important",
    "alert": "Note",
    "hint": "Note",
}
#: the Book theme's hint by its colour: ``{{< hint warning >}}``
_HINT_COLOURS = {"warning": "Warning", "danger": "Danger"}
#: Kubernetes' section headings (``{{% heading "whatsnext" %}}``) as its English pages show
_HEADINGS = {
    "prerequisites": "Before you begin",
    "objectives": "Objectives",
    "lessoncontent": "Lesson content",
    "cleanup": "Cleaning up",
    "whatsnext": "What's next",
    "synopsis": "Synopsis",
    "options": "Options",
    "seealso": "See Also",
}


#: what a Chinese page shows for those words (Kubernetes' ``zh-cn`` strings, then the
#: usual words for the callouts it has none for)
_CHINESE = {
    "Note": "说明",
    "Caution": "注意",
    "Warning": "警告",
    "Tip": "提示",
    "Info": "信息",
    "Danger": "危险",
    "Important": "重要",
    "Before you begin": "准备开始",
    "Objectives": "教程目标",
    "Cleaning up": "清理现场",
    "What's next": "接下来",
    "Synopsis": "简介",
    "Options": "选项",
    "See Also": "另请参见",
    "Feature state": "特性状态",
}


def shortcodes_as_rendered(markdown: str) -> str:
    """``markdown`` with its Hugo shortcodes as a page shows them, outside code; a page in
    Chinese (``detect_language``) shows its labels and headings in Chinese, as
    Kubernetes' ``zh-cn`` pages do.

    >>> shortcodes_as_rendered('1. Check:\\n    {{< copyable "shell-regular" >}}\\n    tiup -v')
    '1. Check:\\n\\n    tiup -v'
    >>> shortcodes_as_rendered("{{< warning >}}\\nDrain first.\\n{{< /warning >}}")
    '**Warning:**\\nDrain first.\\n'
    >>> shortcodes_as_rendered('See [RAID]({{< ref "./NodeRAIDDegraded.md" >}}).')
    'See [RAID](./NodeRAIDDegraded.md).'
    >>> shortcodes_as_rendered('A {{< glossary_tooltip text="Pod" term_id="pod" >}} runs on a '
    ...                        '{{< glossary_tooltip term_id="control-plane" >}} node.')
    'A Pod runs on a control-plane node.'
    >>> shortcodes_as_rendered('## {{% heading "whatsnext" %}}\\nKubernetes v{{< skew latest >}}')
    "## What's next\\nKubernetes v"
    >>> shortcodes_as_rendered("{{< note >}}Drain first.{{< /note >}}")
    '**Note:** Drain first.'
    >>> shortcodes_as_rendered('## {{% heading "prerequisites" %}}\\n{{< note >}}\\n先检查事件。')
    '## 准备开始\\n**说明：**\\n先检查事件。'
    >>> shortcodes_as_rendered("```\\n{{< copyable >}}\\n```\\nWrite `{{< ref x >}}`.")
    '```\\n{{< copyable >}}\\n```\\nWrite `{{< ref x >}}`.'
    """
    if "{{" not in markdown:
        return markdown
    chinese = detect_language(markdown) == "zh"
    return lines_outside_code(markdown, partial(_rendered, chinese=chinese))


def _rendered(line: str, *, chinese: bool) -> str:
    if "{{" not in line:
        return line
    if _SHORTCODE_LINE.match(line):
        match = _SHORTCODE.search(line)
        return _line_shown(match, chinese) if match else ""
    line = _REF_TARGET.sub(r"](\1)", line)
    spans = [(m.start(), m.end()) for m in _CODE_SPAN.finditer(line)]
    return _SHORTCODE.sub(
        lambda m: m[0] if any(a <= m.start() < b for a, b in spans) else _inline(m, chinese),
        line,
    )


def _label(words: str, chinese: bool) -> str:
    """A label in bold as the page shows it: "**Note:**", "**说明：**"."""
    return f"**{_CHINESE.get(words, words)}：**" if chinese else f"**{words}:**"


def _line_shown(shortcode: re.Match[str], chinese: bool = False) -> str:
    """What a line of one shortcode shows: a callout's label as it opens, the file a code
    example shows (``{{% code_sample file="pods/pod.yaml" %}}``, whose text lies in the
    site's examples), the Kubernetes version a feature is in; else nothing.

    >>> _line_shown(_SHORTCODE.match('{{% code_sample file="pods/simple-pod.yaml" %}}'))
    '`pods/simple-pod.yaml`'
    >>> _line_shown(_SHORTCODE.match('{{< feature-state for_k8s_version="v1.25" state="beta" >}}'))
    '**Feature state:** Kubernetes v1.25 [beta]'
    """
    args = shortcode["args"]
    if shortcode["closing"]:
        return ""
    if file := _FILE_ARG.search(args):
        return f"`{file[1]}`"
    if shortcode["name"].lower() == "feature-state" and (version := _VERSION_ARG.search(args)):
        state = _STATE_ARG.search(args)
        shown = f"Kubernetes {version[1]}" + (f" [{state[1]}]" if state else "")
        return f"{_label('Feature state', chinese)} {shown}"
    return _callout_label(shortcode, chinese)


def _callout_label(shortcode: re.Match[str], chinese: bool = False) -> str:
    """What a callout's opening shows: its label ("**Note:**"); another shortcode, nothing.

    >>> _callout_label(_SHORTCODE.match('{{% alert title="Before upgrading" color="warning" %}}'))
    '**Before upgrading:**'
    >>> _callout_label(_SHORTCODE.match("{{< hint danger >}}"))
    '**Danger:**'
    """
    name, args = shortcode["name"].lower(), shortcode["args"]
    if shortcode["closing"] or name not in _CALLOUTS:
        return ""
    title = _TITLE_ARG.search(args)
    first = _FIRST_ARG.match(args)
    label = title[1].strip() if title else ""
    if not label and name == "hint" and first:
        label = _HINT_COLOURS.get(first[1].lower(), "")
    return _label(label or _CALLOUTS[name], chinese)


def _inline(shortcode: re.Match[str], chinese: bool) -> str:
    """What a shortcode inside a line shows: a term's text, a section heading's words;
    any other, nothing."""
    name, args = shortcode["name"].lower(), shortcode["args"]
    if shortcode["closing"]:
        return ""
    if name in _CALLOUTS:
        return _callout_label(shortcode, chinese) + " "
    if name.startswith("glossary_"):
        text = _TEXT_ARG.search(args) or _TERM_ARG.search(args)
        return " ".join(text[1].split()) if text else ""
    if name == "heading" and (first := _FIRST_ARG.match(args)):
        heading = _HEADINGS.get(first[1].lower(), first[1])
        return _CHINESE.get(heading, heading) if chinese else heading
    return ""


#: a shortcode line that opens a block of code (Istio's ``text``, Hugo's ``highlight``), its
#: language the first argument (``bash``, ``"go"``) or ``syntax=…``; and one that closes it
_CODE_OPEN = re.compile(
    r"^(?P<indent>[ \t]*)\{\{[<%][ \t]*(?P<name>text|highlight)"
    r"(?:[ \t]+(?:syntax=)?\"?(?P<lang>[\w+#.-]+)\"?)?"
    r"(?:[ \t][^\n{}]{0,500}?)?[ \t]*[>%]\}\}[ \t]*$"
)
_CODE_CLOSE = re.compile(
    r"^[ \t]*\{\{[<%][ \t]*/[ \t]*(?P<name>text|highlight)[ \t]*[>%]\}\}[ \t]*$"
)


def code_shortcodes_as_fences(markdown: str) -> str:
    """``markdown`` with its blocks of code written as Hugo shortcodes (Istio's ``text``,
    Hugo's ``highlight``) as fenced code blocks at their indent, outside fenced code; an
    opening never closed is left as written.

    >>> print(code_shortcodes_as_fences("1. Label it:\\n\\n    {{< text bash >}}\\n"
    ...                                 "    $ kubectl label ns default x=y\\n    {{< /text >}}"))
    1. Label it:
    <BLANKLINE>
        ```bash
        $ kubectl label ns default x=y
        ```
    """
    if "{{" not in markdown:
        return markdown
    lines = markdown.split("\n")
    code = fenced(lines)
    closings: dict[str, list[int]] = {}
    for at, line in enumerate(lines):
        if not code[at] and (closing := _CODE_CLOSE.match(line)):
            closings.setdefault(closing["name"], []).append(at)
    out: list[str] = []
    at = 0
    while at < len(lines):
        opening = None if code[at] else _CODE_OPEN.match(lines[at])
        ends = closings.get(opening["name"], []) if opening else []
        after = bisect.bisect_right(ends, at)
        if opening is None or after == len(ends):
            out.append(lines[at])
            at += 1
            continue
        end = ends[after]
        body = lines[at + 1 : end]
        ticks = "`" * max(3, 1 + max((_ticks(line) for line in body), default=0))
        indent = opening["indent"]
        out += [f"{indent}{ticks}{opening['lang'] or ''}", *body, f"{indent}{ticks}"]
        at = end + 1
    return "\n".join(out)


def _ticks(line: str) -> int:
    """How many backticks open ``line`` (a fence inside the block needs a longer one)."""
    stripped = line.lstrip(" \t")
    return len(stripped) - len(stripped.lstrip("`"))
