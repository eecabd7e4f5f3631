"""Sphinx's directives, which docutils does not know, read for the text they hold.

docutils answers a directive it does not know with an error and drops its content, so a
Sphinx manual lost every ``.. option::`` description (CMake's ``cmake --build`` options),
``.. versionadded::`` note and ``.. function::`` entry. Before a file is parsed, each
directive name it uses that docutils does not know is registered as ``SphinxDirective``:
its content is parsed as the body it is, under a line that says what it describes.
Directives that only steer Sphinx (``toctree``, ``index``, ``program``) are dropped, and
nothing reads a file (``literalinclude`` keeps only what is written under it).
"""

from __future__ import annotations

import re
from typing import Any

from docutils import nodes
from docutils.frontend import get_default_settings
from docutils.parsers.rst import Directive, Parser, directives
from docutils.parsers.rst.languages import en
from docutils.utils import new_document

from superbiz.knowledge.formats._roles import (
    CODE_DIRECTIVES,
    CONTENT_ONLY_DIRECTIVES,
    DESCRIPTION_DIRECTIVES,
    STEERING_DIRECTIVES,
    VERSION_NOTES,
)

#: a directive's opening line: ``.. name::`` (a domain's ``py:function`` too)
_DIRECTIVE = re.compile(r"^[ \t]*\.\.[ \t]+([A-Za-z][\w:+.-]{0,63})::", re.MULTILINE)
#: new names one file may register (a long-lived converter keeps them)
MAX_NEW_NAMES = 100


class _AnyOption(dict[str, Any]):
    """Every option a Sphinx directive may take, kept as written (never an error)."""

    def __missing__(self, name: str) -> Any:
        return directives.unchanged


class SphinxDirective(Directive):  # type: ignore[misc]  # docutils ships no types
    """A directive docutils does not know: a line naming it, then its content. One of
    another kind whose content reads as nothing has Sphinx generate text from its
    argument (``pip-command-usage:: check``), or labels what is not there: it is left out."""

    optional_arguments = 1
    final_argument_whitespace = True
    has_content = True
    option_spec = _AnyOption(name=directives.unchanged)

    def run(self) -> list[nodes.Node]:
        name = self.name.lower()
        kind = name.rsplit(":", 1)[-1]
        if name in STEERING_DIRECTIVES or name.startswith("auto"):
            return []
        if kind in CODE_DIRECTIVES:
            code = "\n".join(self.content)
            language = self.arguments[0].split()[0] if self.arguments else ""
            return [nodes.literal_block(code, code, classes=[language])] if code.strip() else []
        body = nodes.container()
        if self.content:
            self.state.nested_parse(self.content, self.content_offset, body)
        if kind in VERSION_NOTES:
            return [self._version_note(kind), *body.children]
        label = self._label(name, " ".join(self.arguments).strip(), bool(body.children))
        return [label, *body.children] if label is not None else list(body.children)

    def _version_note(self, kind: str) -> nodes.paragraph:
        """ "*New in version 3.19.*", or with the text written on the directive's own lines
        (CMake's and Python's manuals: ``.. versionadded:: 3.19`` and the note under it
        without a blank line, which docutils reads as the argument) "*New in version 3.19:*"
        and that text, its markup read as Sphinx reads it (it was kept raw: "If ``<file>``
        is not specified … anywhere..")."""
        version, _, said = " ".join(self.arguments).strip().partition("\n")
        version, _, rest = version.partition(" ")
        said = f"{rest}\n{said}".strip()
        note = f"{VERSION_NOTES[kind]} {version}".strip()
        if not said:
            return nodes.paragraph("", "", nodes.emphasis(text=f"{note}."))
        inline, _ = self.state.inline_text(said, self.lineno)
        return nodes.paragraph("", "", nodes.emphasis(text=f"{note}:"), nodes.Text(" "), *inline)

    @staticmethod
    def _label(name: str, argument: str, content: bool) -> nodes.paragraph | None:
        kind = name.rsplit(":", 1)[-1]
        if kind == "seealso":
            also = nodes.Text(f": {argument}" if argument else "")
            return nodes.paragraph("", "", nodes.strong(text="See also"), also)
        if not argument or kind in CONTENT_ONLY_DIRECTIVES:
            return None
        if kind in DESCRIPTION_DIRECTIVES or ":" in name:
            signatures = [line.strip() for line in argument.split("\n") if line.strip()]
            spans: list[nodes.Node] = []
            for signature in signatures:
                spans += [nodes.Text(", ")] if spans else []
                spans.append(nodes.literal(text=signature))
            return nodes.paragraph("", "", *spans)
        if not content:
            return None
        return nodes.paragraph("", "", nodes.strong(text=" ".join(argument.split())))


def register_sphinx_directives(text: str) -> None:
    """Register ``SphinxDirective`` for each directive ``text`` uses that docutils does not
    know (at most ``MAX_NEW_NAMES`` a file)."""
    names = {match.lower() for match in _DIRECTIVE.findall(text)}
    if not names:
        return
    document = new_document("<directives>", get_default_settings(Parser))
    document.reporter.report_level = 5
    unknown = [
        name for name in sorted(names) if directives.directive(name, en, document)[0] is None
    ]
    for name in unknown[:MAX_NEW_NAMES]:
        directives.register_directive(name, SphinxDirective)
