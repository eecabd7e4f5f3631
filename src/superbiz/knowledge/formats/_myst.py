"""MyST Markdown's directives written as the Markdown they stand for.

Sphinx documentation written in MyST wraps notes, version notes and option descriptions
in fences named by a directive (```` ```{note} ````, ``:::{warning}``). A Markdown reader
saw code blocks: a quote showed a note's prose as code, and ``{toctree}`` listed page names
as text. A directive Sphinx knows is written by the rule reStructuredText's directives
follow (``formats._directives``): a note as a quote under its kind, a version note as
"*New in version 3.12.*", an option's signature as code, code as a code block; those that
steer Sphinx go. A fence of another name (pip's ``{pip-cli}``, R Markdown's ``{r}``)
stays as it is written.
"""

from __future__ import annotations

import re

from superbiz.knowledge.formats._markdown import (
    closes_fence,
    fence_after,
    quoted,
    without_blank_ends,
)
from superbiz.knowledge.formats._roles import (
    CODE_DIRECTIVES,
    CONTENT_ONLY_DIRECTIVES,
    DESCRIPTION_DIRECTIVES,
    STEERING_DIRECTIVES,
    VERSION_NOTES,
    code_span,
)

#: a directive's opening fence: ```` ```{name} argument ```` or ``:::{name} argument``
_OPEN = re.compile(
    r"^[ \t]{0,3}(?P<fence>`{3,}|:{3,})\{(?P<name>[A-Za-z][\w:+.-]*)\}[ \t]*(?P<argument>.*)$"
)
#: a directive's option line at the top of its body (``:maxdepth: 2``)
_OPTION_LINE = re.compile(r"^[ \t]*:[\w-]+:(?:[ \t].*)?$")
_ADMONITIONS = frozenset(
    "admonition attention caution danger error hint important note tip warning".split()
)
#: directives that group content under a label (a tab's name, a card's title)
_CONTAINERS = frozenset(
    "card container dropdown glossary grid grid-item grid-item-card hlist only rubric "
    "sidebar tab tab-item tab-set topic".split()
)


def myst_directives_as_markdown(markdown: str) -> str:
    """``markdown`` with each MyST directive Sphinx knows written as its text.

    >>> myst_directives_as_markdown("```{note}\\nRestart the pods.\\n```")
    '> **Note**\\n> Restart the pods.'
    >>> myst_directives_as_markdown("```{versionadded} 3.12\\n```\\n```{r}\\nplot(x)\\n```")
    '*New in version 3.12.*\\n```{r}\\nplot(x)\\n```'
    """
    if "{" not in markdown:
        return markdown
    return "\n".join(_lines(markdown.split("\n")))


def _lines(lines: list[str]) -> list[str]:
    out: list[str] = []
    number = 0
    code: str | None = None  # the fence of the plain code block we are in
    while number < len(lines):
        line = lines[number]
        opening = None if code else _OPEN.match(line)
        if opening is None:
            code = fence_after(line, code)
            out.append(line)
            number += 1
            continue
        end = next(
            (i for i in range(number + 1, len(lines)) if closes_fence(lines[i], opening["fence"])),
            len(lines),
        )
        written = _directive(
            opening["name"].lower(), opening["argument"].strip(), lines[number + 1 : end]
        )
        out.extend(lines[number : end + 1] if written is None else written)
        number = end + 1
        if written == [] and (not out or not out[-1].strip()):
            while number < len(lines) and not lines[number].strip():
                number += 1  # a dropped directive leaves one blank line, not two
    return out


def _directive(name: str, argument: str, body: list[str]) -> list[str] | None:
    """The lines ``{name}`` stands for; None: a directive Sphinx does not know, kept."""
    kind = name.rsplit(":", 1)[-1]
    while body and _OPTION_LINE.match(body[0]):
        body = body[1:]
    if kind in STEERING_DIRECTIVES or kind.startswith("auto"):
        return []
    if kind in CODE_DIRECTIVES or kind in ("code", "code-block", "sourcecode"):
        language = argument.split()[0] if argument else ""
        return [f"```{language}", *body, "```"] if "".join(body).strip() else []
    inner = without_blank_ends(_lines(body))
    if kind in _ADMONITIONS:
        title = argument if kind == "admonition" and argument else kind.capitalize()
        text = inner if kind == "admonition" or not argument else [argument, *inner]
        return quoted([f"**{title}**", *text])
    if kind in VERSION_NOTES:
        return [f"*{VERSION_NOTES[kind]} {argument}.*", *(["", *inner] if inner else [])]
    if kind == "seealso":
        return [f"**See also**{': ' + argument if argument else ''}", "", *inner]
    if kind in DESCRIPTION_DIRECTIVES or ":" in name:
        return [code_span(argument), "", *inner] if argument else inner
    if kind not in _CONTAINERS:
        return None
    if not inner:
        return []
    if not argument or kind in CONTENT_ONLY_DIRECTIVES:
        return inner
    return [f"**{' '.join(argument.split())}**", "", *inner]
