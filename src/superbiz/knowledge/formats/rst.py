"""reStructuredText to Markdown, with docutils.

The text is parsed into docutils' document tree and that tree is written as Markdown;
no Sphinx, no HTML. Nothing in a file reaches outside it: ``include`` and ``raw``
(which read files and URLs) are disabled and docutils' configuration files are not
read. Sphinx's directives, which docutils does not know, keep the text they hold
(``formats._directives``); markup docutils cannot read is dropped with its error message
instead of being written into the text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from superbiz.exceptions import DocumentError
from superbiz.knowledge.formats import ConvertedDocument
from superbiz.knowledge.formats._directives import register_sphinx_directives
from superbiz.knowledge.formats._markdown import (
    fence,
    heading,
    inline,
    join_blocks,
    quoted,
    table,
)
from superbiz.knowledge.formats._roles import code_span, role_text
from superbiz.knowledge.formats.decode import markup_text

_SETTINGS = {
    "file_insertion_enabled": False,  # no ``include``, no ``csv-table :file:``
    "raw_enabled": False,  # no ``raw`` (it can read a URL)
    "_disable_config": True,  # no docutils.conf from the working directory
    "report_level": 5,  # say nothing on stderr
    "halt_level": 5,  # never stop on a markup error: keep what parses
    "input_encoding": "unicode",
    "syntax_highlight": "none",
    "smart_quotes": False,
}
#: deeper nesting than this is read as plain text (a file cannot exhaust the stack)
_MAX_DEPTH = 60
#: a role docutils does not know (Sphinx's ``:ref:`text <target>```), as it keeps it
_ROLE = re.compile(r":(?P<role>[\w.+-]+(?::[\w.+-]+)?):`(?P<body>.+)`", re.DOTALL)


def convert_rst(data: bytes, label: str, encodings: Sequence[str]) -> ConvertedDocument:
    """Title and Markdown of a reStructuredText file."""
    from docutils.core import publish_doctree

    text = markup_text(data, label, encodings, ".rst")
    register_sphinx_directives(text)
    try:
        tree = publish_doctree(text, source_path=label, settings_overrides=_SETTINGS)
    except RecursionError as exc:
        raise DocumentError(label, "reStructuredText nested too deeply") from exc
    except Exception as exc:  # docutils raises its own errors for broken markup
        raise DocumentError(label, f"unreadable reStructuredText: {exc}") from exc
    title = inline(tree.get("title", "")) or None
    # the title heads the body, as a Markdown runbook's ``# Title`` does, so that every
    # chunk's heading path starts with it
    blocks = [heading(1, title or ""), *_Writer().blocks(tree, 0, 2 if title else 1)]
    return ConvertedDocument(title=title, markdown=join_blocks(blocks))


class _Writer:
    """Walks the doctree; block nodes become Markdown blocks, inline nodes text."""

    def blocks(self, node: Any, depth: int, level: int) -> list[str]:
        from docutils import nodes

        out: list[str] = []
        for child in node.children:
            if depth > _MAX_DEPTH:
                out.append(inline(child.astext()))
                continue
            if isinstance(
                child,
                (
                    nodes.system_message,
                    nodes.comment,
                    nodes.substitution_definition,
                    nodes.target,
                    nodes.pending,
                    nodes.raw,
                    nodes.decoration,
                ),
            ):
                continue
            if isinstance(child, nodes.title) and isinstance(node, nodes.document):
                continue  # the document title: kept as the title
            if isinstance(child, nodes.subtitle) and isinstance(node, nodes.document):
                # docutils made the title's only section a subtitle; Sphinx keeps it a
                # section (no ``doctitle_xform``), and so does its heading path here
                out.append(heading(level, self.text(child)))
                level += 1
                continue
            if isinstance(child, nodes.section):
                title = child.next_node(nodes.title)
                if title is not None:
                    out.append(heading(level, self.text(title)))
                out.extend(self.blocks(child, depth + 1, level + 1))
            elif isinstance(child, nodes.title):
                continue  # a section's title, written above
            elif isinstance(child, (nodes.literal_block, nodes.doctest_block)):
                language = " ".join(c for c in child.get("classes", []) if c != "code")
                out.append(fence(child.astext(), language))
            elif isinstance(child, (nodes.bullet_list, nodes.enumerated_list)):
                out.append(self.items(child, depth, level))
            elif isinstance(child, nodes.table):
                out.append(table(self.rows(child)))
            elif isinstance(child, nodes.definition_list):
                for item in child.children:
                    term = item.next_node(nodes.term)
                    definition = item.next_node(nodes.definition)
                    if term is not None:
                        out.append(f"**{self.text(term)}**")
                    if definition is not None:
                        out.extend(self.blocks(definition, depth + 1, level))
            elif isinstance(child, nodes.field_list):
                for field in child.children:
                    name, body = field.children[0], field.children[1]
                    value = " ".join(self.blocks(body, depth + 1, level))
                    out.append(f"{self.text(name)}: {value}")
            elif isinstance(child, nodes.Admonition):
                name = type(child).__name__.capitalize()
                inner = self.blocks(child, depth + 1, level)
                if inner and isinstance(child, nodes.admonition):
                    name, inner = inner[0], inner[1:]
                out.append("\n".join(quoted([f"**{name}**", *"\n\n".join(inner).split("\n")])))
            elif isinstance(child, nodes.block_quote):
                inner = self.blocks(child, depth + 1, level)
                out.append("\n".join(quoted("\n\n".join(inner).split("\n"))))
            elif isinstance(child, (nodes.line_block, nodes.TextElement)):
                out.append(self.text(child))
            else:
                out.extend(self.blocks(child, depth + 1, level))
        return [block for block in out if block]

    def items(self, node: Any, depth: int, level: int) -> str:
        from docutils import nodes

        ordered = isinstance(node, nodes.enumerated_list)
        lines: list[str] = []
        for number, item in enumerate(node.children, start=1):
            marker = f"{number}. " if ordered else "- "
            inner = "\n".join(self.blocks(item, depth + 1, level)).split("\n")
            lines.append(marker + inner[0])
            lines.extend(" " * len(marker) + line if line else "" for line in inner[1:])
        return "\n".join(lines)

    def rows(self, node: Any) -> list[list[str]]:
        from docutils import nodes

        rows = []
        for row in node.findall(nodes.row):
            rows.append([inline(entry.astext()) for entry in row.children])
        return rows

    def text(self, node: Any) -> str:
        """Inline text: literals as code spans, references as their text."""
        from docutils import nodes

        parts = []
        for child in node.children:
            if isinstance(child, (nodes.system_message, nodes.target, nodes.footnote_reference)):
                continue
            if isinstance(child, nodes.literal):
                parts.append(code_span(child.astext()))
            elif isinstance(child, nodes.problematic):
                parts.append(_role_text(child.astext()))
            elif isinstance(child, nodes.strong):
                parts.append(f"**{child.astext()}**")
            elif isinstance(child, nodes.emphasis):
                parts.append(f"*{child.astext()}*")
            elif isinstance(child, nodes.Text):
                parts.append(child.astext())
            else:
                parts.append(self.text(child) if child.children else child.astext())
        return "".join(parts).strip()


def _role_text(raw: str) -> str:
    """What a reader sees of a role docutils does not know (``role_text``); other broken
    markup is kept as written.

    >>> _role_text(":ref:`-v, --verbose <--verbose>`"), _role_text("*")
    ('-v, --verbose', '*')
    """
    match = _ROLE.fullmatch(raw)
    return raw if match is None else role_text(match["role"], match["body"])
