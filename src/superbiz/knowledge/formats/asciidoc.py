"""AsciiDoc to Markdown, read line by line as Asciidoctor reads a page's blocks.

Teams that write with Asciidoctor or Antora keep their runbooks and admin guides as
``.adoc`` files; superbiz listed them as a format it does not read. No AsciiDoc library on
PyPI is both kept up and Apache-compatible (``asciidoc`` is GPL, Asciidoctor is Ruby), and a
reader needs what a page shows, not its HTML: the document title (``= Title``) and sections
(``== Section``) as headings, listings and literal blocks as code, admonitions (``NOTE:``,
``[WARNING]`` blocks) as quotes under their kind, tables (``|===``, CSV, DSV) as pipe tables,
lists and description lists as lists, and inline markup as its text
(``formats._asciidoc_text``). Comments, page breaks and steering macros (``toc::[]``) hold
nothing a reader reads and are left out; ``include::`` names another file, which is not
read: it is a document of its own when it is in the knowledge base.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from superbiz.knowledge.formats import ConvertedDocument
from superbiz.knowledge.formats._asciidoc_tables import in_line, table_cells
from superbiz.knowledge.formats._asciidoc_text import inline_text, preprocessed, substituted
from superbiz.knowledge.formats._markdown import fence, heading, inline, join_blocks, quoted, table
from superbiz.knowledge.formats.decode import markup_text

_TITLE = re.compile(r"^(?P<marks>={1,6}|#{1,6})[ \t]+(?P<text>\S.*?)(?:[ \t]+(?P=marks))?[ \t]*$")
#: a block's attribute line (``[source,bash]``, ``[NOTE]``, ``[%header,cols="1,2"]``)
_ATTRIBUTES = re.compile(r"^\[(?P<list>[^\[\]].*)\][ \t]*$")
#: one entry of a block's attribute list, a quoted value with its commas
_ATTRIBUTE_ENTRY = re.compile(r'(?:[^,"]|"[^"]*"?)+')
_ANCHOR = re.compile(r"^\[\[[^\]]+\]\][ \t]*$")
_BLOCK_TITLE = re.compile(r"^\.(?P<title>[^\s.].*)$")
#: a delimited block's opening line: listing, literal, example, sidebar, quote, passthrough,
#: comment or open block; a table; a Markdown fence, which Asciidoctor reads too
_DELIMITER = re.compile(
    r"^(?:(?P<line>-{4,}|\.{4,}|={4,}|\*{4,}|_{4,}|\+{4,}|/{4,}|--)"
    r"|(?P<table>[|,:!]={3,})|(?P<fence>`{3})(?P<language>[\w+#.-]*))[ \t]*$"
)
_ADMONITION = re.compile(r"^(?P<kind>NOTE|TIP|IMPORTANT|WARNING|CAUTION):[ \t]+(?P<text>.*)$")
_ADMONITIONS = frozenset({"NOTE", "TIP", "IMPORTANT", "WARNING", "CAUTION"})
#: a list item: bullets (``*``, ``**``, ``-``), ordered (``.``, ``1.``, ``a.``), a callout's
_ITEM = re.compile(
    r"^[ \t]*(?P<marker>\*{1,5}|-|\.{1,5}|\d{1,9}\.|[a-zA-Z]\.|<(?:\d+|\.)>)[ \t]+(?P<text>\S.*)$"
)
_TERM = re.compile(r"^(?P<term>\S.*?)(?P<marks>:{2,4}|;;)(?:[ \t]+(?P<text>.*))?$")
_BLOCK_MACRO = re.compile(r"^(?P<name>[a-z]+)::(?P<target>\S*?)\[(?P<attributes>.*)\][ \t]*$")
_CALLOUT = re.compile(r"[ \t]*(?:(?://|#|--|;;?)[ \t]*)?(?:<(?:\d+|\.)>[ \t]*)+$")
_BREAK = re.compile(r"^(?:'{3,}|<{3,}|-{3}|\*{3})[ \t]*$")
#: compound blocks nested deeper than this are read as text (a page cannot exhaust the stack)
_MAX_DEPTH = 40


def convert_asciidoc(data: bytes, label: str, encodings: Sequence[str]) -> ConvertedDocument:
    """Title and Markdown of an AsciiDoc file."""
    text = markup_text(data, label, encodings, "AsciiDoc")
    attributes: dict[str, str] = {}
    lines = preprocessed(text.split("\n"), attributes)
    title, start = _header(lines)
    title = title or attributes.get("doctitle")
    references = _references(lines, attributes)
    reader = _Reader(attributes, shift=1 if title else 0, references=references)
    blocks = reader.blocks(lines[start:], depth=0)
    title = inline(inline_text(title, attributes)) if title else None
    return ConvertedDocument(
        title=title or None, markdown=join_blocks([heading(1, title or ""), *blocks])
    )


def _header(lines: Sequence[str]) -> tuple[str | None, int]:
    """The document title and where the body starts: the title line (``= Title``), the
    author and revision lines right under it, up to the header's blank line."""
    number = 0
    while number < len(lines) and _above_title(lines[number]):
        number += 1
    title = _TITLE.match(lines[number]) if number < len(lines) else None
    if title is None or len(title["marks"]) != 1:
        return None, 0
    number += 1
    while number < len(lines) and lines[number].strip():
        number += 1  # the author and revision lines
    return title["text"], number


def _above_title(line: str) -> bool:
    """Whether ``line`` may stand above the document title (comments and attribute
    entries are gone by now): blank, the title's id or role
    (``[id='proc-recovering-ca-{context}']``, ``[[ca]]``)."""
    return not line.strip() or bool(_ATTRIBUTES.match(line) or _ANCHOR.match(line))


@dataclass
class _Pending:
    """What the lines above a block say of it: its attributes and its title."""

    attributes: list[str] = field(default_factory=list)
    title: str = ""

    @property
    def style(self) -> str:
        first = self.attributes[0] if self.attributes else ""
        if "=" in first:
            return ""
        return first.split("%", 1)[0].split("#", 1)[0].split(".", 1)[0].strip()

    def named(self, name: str) -> str | None:
        for attribute in self.attributes:
            key, _, value = attribute.partition("=")
            if value and key.strip() == name:
                return value.strip().strip('"')
        return None


#: an id a block's attribute line gives: ``[#id]``, ``[#id.role]``, ``[id="id"]``
_ID = re.compile(r"^\[(?:#(?P<short>[^\s.%,\]]+)|.*?\bid=[\"']?(?P<named>[^\"',\]]+))")
_ANCHOR_ID = re.compile(r"^\[\[(?P<id>[^,\]]+)(?:,(?P<reftext>[^\]]+))?\]\]")


def _references(lines: Sequence[str], attributes: Mapping[str, str]) -> dict[str, str]:
    """The page's sections by the ids a cross reference may name them by: the id written
    above one (``[id="proc-upgrade_{context}"]``, ``[#upgrade]``, ``[[upgrade]]``, whose
    reference text wins) and the ids Asciidoctor (``_upgrading_the_members``) and Antora
    (``upgrading-the-members``) give it. A reference to one shows its title, as
    Asciidoctor does, not its id's words ("proc upgrade ops").

    >>> _references(["[id='up_{c}']", "== Upgrading the members"], {"c": "ops"})["up_ops"]
    'Upgrading the members'
    """
    found: dict[str, str] = {}
    for number, line in enumerate(lines):
        section = _TITLE.match(line)
        if section is None:
            continue
        title = substituted(section["text"], attributes)
        words = re.sub(r"\W+", " ", title.lower()).split()
        found.setdefault("_" + "_".join(words), title)
        found.setdefault("-".join(words), title)
        above = number - 1
        while above >= 0 and (_ATTRIBUTES.match(lines[above]) or _ANCHOR.match(lines[above])):
            if anchor := _ANCHOR_ID.match(lines[above]):
                found[substituted(anchor["id"].strip(), attributes)] = anchor["reftext"] or title
            elif written := _ID.match(lines[above]):
                found[substituted(written["short"] or written["named"], attributes)] = title
            above -= 1
    return found


class _Reader:
    """Reads a run of lines into Markdown blocks; compound blocks read their own lines."""

    def __init__(
        self, attributes: dict[str, str], shift: int, references: Mapping[str, str]
    ) -> None:
        self.attributes = attributes
        self.shift = shift
        #: the page's sections by id, for cross references that name no text
        self.references = references

    def text(self, line: str) -> str:
        return inline_text(line, self.attributes, self.references)

    def blocks(self, lines: Sequence[str], depth: int) -> list[str]:
        out: list[str] = []
        pending = _Pending()
        number = 0
        while number < len(lines):
            line = lines[number]
            if not line.strip() or _ANCHOR.match(line) or _BREAK.match(line):
                number += 1
                continue
            delimiter = _DELIMITER.match(line)
            if delimiter:
                end = _closing(lines, number, line.rstrip(), bool(delimiter["fence"]))
                inner = list(lines[number + 1 : end])
                out.extend(self.delimited(delimiter, inner, pending, depth))
                pending, number = _Pending(), end + 1
                continue
            if (attributes := _ATTRIBUTES.match(line)) and not _TITLE.match(line):
                pending.attributes = _split_attributes(attributes["list"])
                number += 1
                continue
            if (title := _BLOCK_TITLE.match(line)) and not _ITEM.match(line):
                pending.title = self.text(title["title"])
                number += 1
                continue
            if section := _TITLE.match(line):
                level = len(section["marks"]) - 1 + self.shift
                out.append(heading(max(level, 1), self.text(section["text"])))
                pending, number = _Pending(), number + 1
                continue
            if macro := _BLOCK_MACRO.match(line):
                if macro["name"] == "image":
                    out.append(self.text(_image_text(macro["attributes"], pending)))
                pending, number = _Pending(), number + 1
                continue
            if _listing(line):
                end, written = self.listed(lines, number, depth)
                out.extend(self.titled(pending, written))
                pending, number = _Pending(), end
                continue
            end = _paragraph_end(lines, number)
            out.extend(self.paragraph(lines[number:end], pending))
            pending, number = _Pending(), end
        return [block for block in out if block]

    def titled(self, pending: _Pending, blocks: list[str]) -> list[str]:
        return [f"**{pending.title}**", *blocks] if pending.title else blocks

    def paragraph(self, lines: Sequence[str], pending: _Pending) -> list[str]:
        style = pending.style
        if lines[0][:1] in (" ", "\t") or style in ("literal", "listing", "source"):
            language = _language(pending, self.attributes) if style != "literal" else ""
            return self.titled(pending, [fence(_dedented(lines), language)])
        if admonition := _ADMONITION.match(lines[0]):  # ``NOTE: text``
            said = self.text("\n".join([admonition["text"], *lines[1:]]))
            return [self.admonition(admonition["kind"], pending.title, [said])]
        text = self.text("\n".join(line.strip() for line in lines))
        if style in _ADMONITIONS:
            return [self.admonition(style, pending.title, [text])]
        if style in ("quote", "verse"):
            return [self.quote(pending.title, [text])]
        return self.titled(pending, [text])

    def admonition(self, kind: str, title: str, blocks: list[str]) -> str:
        return self.quote(title or kind.capitalize(), blocks)

    def quote(self, title: str, blocks: list[str]) -> str:
        body = "\n\n".join(blocks).split("\n")
        return "\n".join(quoted([f"**{title}**", *body] if title else body))

    def delimited(
        self, delimiter: re.Match[str], lines: list[str], pending: _Pending, depth: int
    ) -> list[str]:
        """A delimited block: code for listings and literals, a table, or a compound
        block's own blocks; comments and passthroughs (raw HTML) hold nothing to read."""
        opening = delimiter[0].strip()
        style = pending.style
        if delimiter["table"]:
            return self.titled(pending, [table(self.rows(opening[0], lines, pending, depth))])
        if opening[0] in "/+":
            return []
        code = delimiter["fence"] or (opening[0] in "-." and opening != "--")
        if code or style in ("source", "listing", "literal"):
            if delimiter["fence"]:
                language = delimiter["language"]
            else:
                language = "" if opening[0] == "." else _language(pending, self.attributes)
            written = [_CALLOUT.sub("", line) for line in lines]
            if "attributes" in (pending.named("subs") or ""):
                written = [substituted(line, self.attributes) for line in written]
            return self.titled(pending, [fence("\n".join(written), language)])
        return self.compound(lines, pending, depth, aside=opening[0] in "*_")

    def compound(
        self, lines: list[str], pending: _Pending, depth: int, aside: bool = False
    ) -> list[str]:
        """An example, sidebar, quote or open block: its own blocks, under its kind when
        it is an admonition, as a quote when it is one."""
        inner = self.blocks(lines, depth + 1) if depth < _MAX_DEPTH else [inline("\n".join(lines))]
        style = pending.style
        if style in _ADMONITIONS:
            return [self.admonition(style, pending.title, inner)]
        if aside or style in ("quote", "verse"):
            return [self.quote(pending.title, inner)]
        return self.titled(pending, inner)

    def rows(
        self, separator: str, lines: list[str], pending: _Pending, depth: int
    ) -> list[list[str]]:
        """A table's rows, the first one its header as a pipe table has one: cells in
        order, so many to a row as the table's columns (``cols``, else its first line's
        cells); a cell spanning columns (``2+|``) fills them, one repeated (``3*|``) is
        written as often, and one of AsciiDoc content (``a|``) is read as blocks."""
        rows = table_cells(separator, lines, pending.named("cols"))
        return [
            [self.cell(text, blocks, depth) for text, blocks in row]
            for row in rows
            if any(text.strip() for text, _ in row)
        ]

    def cell(self, text: str, blocks: bool, depth: int) -> str:
        """A cell's text on one line; its code blocks as code spans."""
        if not blocks or depth >= _MAX_DEPTH:
            return self.text(text)
        written = self.blocks(text.split("\n"), depth + 1)
        return " ".join(in_line(block) for block in written)

    def listed(self, lines: Sequence[str], number: int, depth: int) -> tuple[int, list[str]]:
        """A list from ``number``: its items as Markdown list lines, nested as AsciiDoc
        nests them (each new kind of marker a level deeper), each ``+`` attaching the
        block under it to its item; and where the list ends."""
        out: list[str] = []
        items: list[str] = []
        kinds: list[str] = []  # the markers of the open levels, outermost first
        counts: list[int] = []
        while number < len(lines):
            line = lines[number]
            if item := _ITEM.match(line):
                kind = _kind(item["marker"])
                if kind in kinds:
                    del kinds[kinds.index(kind) + 1 :], counts[kinds.index(kind) + 1 :]
                else:
                    kinds.append(kind)
                    counts.append(0)
                counts[-1] += 1
                bullet = f"{counts[-1]}." if kind[0] == "." else "-"
                level, text = len(kinds) - 1, item["text"]
            elif term := _description(line):  # ``term::``, ``term:::`` one level deeper
                level, bullet = max(len(term["marks"]) - 2, 0), "-"
                kinds, counts = [], []
                text = f"**{term['term']}**" + (f": {term['text']}" if term["text"] else "")
            elif line.strip() == "+":  # the next block belongs to the item above
                end = _block_end(lines, number + 1)
                out.extend(["\n".join(items), *self.blocks(lines[number + 1 : end], depth + 1)])
                items, number = [], end
                continue
            else:
                following = number
                while following < len(lines) and not lines[following].strip():
                    following += 1
                if following == number or following == len(lines) or not _listing(lines[following]):
                    break
                number = following  # blank lines between items: the list goes on
                continue
            end = number + 1
            while end < len(lines) and _continues(lines[end]):
                end += 1
            body = "\n".join([text, *(more.strip() for more in lines[number + 1 : end])])
            items.append("  " * level + f"{bullet} " + inline(self.text(body)))
            number = end
        return number, [*out, "\n".join(items)]


def _kind(marker: str) -> str:
    """The kind of a list marker: ``.``, ``1.``, ``a.`` and ``<1>`` are one ordered kind;
    ``-`` and ``*`` one bulleted kind; ``**`` another, nested in it."""
    if marker[0] in ".<" or marker[0].isalnum():
        return "." * len(marker) if marker[0] == "." else "."
    return "*" if marker == "-" else marker


def _listing(line: str) -> bool:
    return bool(_ITEM.match(line) or _description(line))


def _description(line: str) -> re.Match[str] | None:
    """A description list's term line (``Symptom:: the pod restarts``), not a block macro."""
    if _BLOCK_MACRO.match(line) or "://" in line.split("::", 1)[0]:
        return None
    return _TERM.match(line)


def _continues(line: str) -> bool:
    """Whether ``line`` goes on with the list item above it (its paragraph's next line)."""
    return bool(line.strip()) and line.strip() != "+" and not (
        _ITEM.match(line) or _description(line) or _DELIMITER.match(line)
        or _ATTRIBUTES.match(line) or _BLOCK_TITLE.match(line) or _TITLE.match(line)
    )  # fmt: skip


def _paragraph_end(lines: Sequence[str], number: int) -> int:
    """Where the paragraph at ``number`` ends: a blank line, a list's continuation
    (``+``), a block's delimiter, a list item."""
    end = number + 1
    while end < len(lines) and lines[end].strip() not in ("", "+"):
        line = lines[end]
        if (
            _DELIMITER.match(line)
            or _ITEM.match(line)
            or _ATTRIBUTES.match(line)
            or _TITLE.match(line)
        ):
            break
        end += 1
    return end


def _block_end(lines: Sequence[str], number: int) -> int:
    """Where the block starting at ``number`` (after its attribute and title lines) ends."""
    while number < len(lines) and (
        _ATTRIBUTES.match(lines[number]) or _BLOCK_TITLE.match(lines[number])
    ):
        number += 1
    if number < len(lines) and (delimiter := _DELIMITER.match(lines[number])):
        return _closing(lines, number, lines[number].rstrip(), bool(delimiter["fence"])) + 1
    return _paragraph_end(lines, number) if number < len(lines) else number


def _closing(lines: Sequence[str], number: int, opening: str, markdown_fence: bool) -> int:
    """The line that closes the block opened at ``number`` (its own delimiter again), or
    the end of the lines when nothing closes it, as Asciidoctor reads an open block."""
    closing = "```" if markdown_fence else opening
    for end in range(number + 1, len(lines)):
        if lines[end].rstrip() == closing:
            return end
    return len(lines)


def _split_attributes(text: str) -> list[str]:
    """A block attribute list's entries, a quoted value kept whole.

    >>> _split_attributes('source,bash,subs="attributes+,quotes"')
    ['source', 'bash', 'subs="attributes+,quotes"']
    >>> _split_attributes('cols="1,2,1", options="header"')
    ['cols="1,2,1"', 'options="header"']
    """
    return [entry.strip() for entry in _ATTRIBUTE_ENTRY.findall(text) if entry.strip()]


def _image_text(attributes: str, pending: _Pending) -> str:
    """What an image says in words: its alternative text (first, or ``alt=``), else its
    title (``title=``, or a block title above it).

    >>> _image_text('title="Backup chain",role="middle"', _Pending())
    'Backup chain'
    >>> _image_text("Topology, 800", _Pending()), _image_text("width=800", _Pending())
    ('Topology', '')
    """
    entries = _split_attributes(attributes)
    image = _Pending(entries)
    positional = next((entry for entry in entries[:1] if "=" not in entry), "")
    return positional.strip('"') or image.named("alt") or image.named("title") or pending.title


def _language(pending: _Pending, attributes: dict[str, str]) -> str:
    """A listing's language: ``[source,bash]``, ``[,bash]``, or the page's default."""
    if (
        pending.style in ("source", "")
        and len(pending.attributes) > 1
        and "=" not in pending.attributes[1]
    ):
        return pending.attributes[1]
    if pending.style == "source":
        return attributes.get("source-language", "")
    return pending.named("language") or ""


def _dedented(lines: Sequence[str]) -> str:
    indent = min(len(line) - len(line.lstrip()) for line in lines if line.strip())
    return "\n".join(line[indent:] for line in lines)
