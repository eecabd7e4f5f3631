"""Word ``.docx`` to Markdown, with python-docx.

Headings come from paragraph styles (``Heading 1``…, or a style's outline level), the
``Title`` paragraph is the title, tables become pipe tables, code paragraphs (a code
style or a monospaced font throughout) become fenced blocks, list paragraphs become
list items and hyperlinks keep their text.

A .docx is a zip archive: before python-docx reads a byte, the archive's directory is
checked, so a file that is not a zip, or whose parts would unzip past
``MAX_UNZIPPED_BYTES`` (a zip bomb), is refused with the reason.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterator
from typing import Any

from superbiz.exceptions import DocumentError
from superbiz.knowledge.formats import ConvertedDocument
from superbiz.knowledge.formats._markdown import fence, heading, inline, join_blocks, table
from superbiz.knowledge.formats._sniff import mismatch

#: what a .docx's parts may unzip to in all: a long manual with pictures is a few MB
MAX_UNZIPPED_BYTES = 50_000_000
#: parts in the archive (a document has a few dozen)
MAX_PARTS = 5_000
_HEADING_STYLE = re.compile(r"^heading\s*([1-9])$", re.IGNORECASE)
_CODE_STYLES = frozenset({"source code", "html preformatted", "code", "plain text", "macro text"})
_CODE_RUN_STYLES = frozenset({"verbatim char", "html code", "source code char", "code char"})
_MONO = re.compile(r"mono|courier|consol|menlo", re.IGNORECASE)
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def convert_docx(data: bytes, label: str) -> ConvertedDocument:
    """Title and Markdown of a Word document."""
    _check_archive(data, label)
    import docx
    from docx.opc.exceptions import PackageNotFoundError

    try:
        document = docx.Document(io.BytesIO(data))
        title, blocks = _read(document)
    except (PackageNotFoundError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        raise DocumentError(label, f"corrupt Word file: {exc}") from exc
    except Exception as exc:  # lxml's XMLSyntaxError and the like, from a damaged part
        raise DocumentError(label, f"corrupt Word file: {type(exc).__name__}: {exc}") from exc
    core_title = inline(document.core_properties.title or "")
    return ConvertedDocument(title=title or core_title or None, markdown=join_blocks(blocks))


def _check_archive(data: bytes, label: str) -> None:
    """Refuse what is not a .docx, or would unzip too far, from the zip directory alone."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as exc:
        reason = mismatch(data, ".docx")
        if "does not match" in reason:
            reason = "not a Word .docx: not a zip archive"
        raise DocumentError(label, reason) from exc
    with archive:
        parts = archive.infolist()
        if len(parts) > MAX_PARTS:
            raise DocumentError(
                label, f"zip bomb refused: {len(parts)} parts (the limit is {MAX_PARTS})"
            )
        unzipped = sum(part.file_size for part in parts)
        if unzipped > MAX_UNZIPPED_BYTES:
            raise DocumentError(
                label,
                f"zip bomb refused: its parts unzip to {unzipped} bytes "
                f"(the limit is {MAX_UNZIPPED_BYTES})",
            )
        if "word/document.xml" not in archive.namelist():
            raise DocumentError(label, "not a Word .docx: a zip archive without word/document.xml")


class _Styles:
    """The document's styles by id, read once from styles.xml: python-docx looks a
    style up by scanning every style (``paragraph.style``), 1.1 of the 1.2 s the
    24-page alert-rules .docx took (now 0.2 s)."""

    def __init__(self, document: Any) -> None:
        self.names: dict[str, str] = {}
        self.pprs: dict[str, Any] = {}
        self.default = ""
        for style in document.styles.element.iterchildren(f"{_W}style"):
            sid = style.get(f"{_W}styleId") or ""
            name = style.find(f"{_W}name")
            self.names[sid] = (name.get(f"{_W}val") if name is not None else sid).lower()
            self.pprs[sid] = style.find(f"{_W}pPr")
            if style.get(f"{_W}type") == "paragraph" and style.get(f"{_W}default") in ("1", "true"):
                self.default = sid

    def of_paragraph(self, paragraph: Any) -> str:
        ppr = paragraph._p.pPr
        found = ppr.find(f"{_W}pStyle") if ppr is not None else None
        return (found.get(f"{_W}val") if found is not None else None) or self.default

    def is_code_run(self, run: Any) -> bool:
        rpr = run._r.rPr
        if rpr is None:
            return False
        found = rpr.find(f"{_W}rStyle")
        if found is not None and self.names.get(found.get(f"{_W}val"), "") in _CODE_RUN_STYLES:
            return True
        fonts = rpr.find(f"{_W}rFonts")
        return fonts is not None and bool(_MONO.search(fonts.get(f"{_W}ascii") or ""))


def _read(document: Any) -> tuple[str | None, list[str]]:
    from docx.table import Table

    styles = _Styles(document)
    title: str | None = None
    blocks: list[str] = []
    code: list[str] = []
    for item in document.iter_inner_content():
        style = "" if isinstance(item, Table) else styles.of_paragraph(item)
        if not isinstance(item, Table) and _is_code(item, styles.names.get(style, ""), styles):
            code.append(item.text)
            continue
        if code:
            blocks.append(fence("\n".join(code)))
            code = []
        if isinstance(item, Table):
            blocks.append(table(list(_rows(item))))
            continue
        name = styles.names.get(style, "")
        if name == "title" and title is None:
            title = inline(item.text) or None
            continue
        level = _heading_level(item, name, styles.pprs.get(style))
        if level:
            blocks.append(heading(level, item.text))
        elif text := _text(item, styles):
            blocks.append(_list_marker(item, styles.pprs.get(style)) + text)
    if code:
        blocks.append(fence("\n".join(code)))
    return title, blocks


def _heading_level(paragraph: Any, style: str, style_ppr: Any) -> int:
    match = _HEADING_STYLE.match(style.strip())
    if match:
        return int(match.group(1))
    for element in (paragraph._p.pPr, style_ppr):
        level = element.find(f"{_W}outlineLvl") if element is not None else None
        if level is not None:
            value = int(level.get(f"{_W}val", "9"))
            if value < 6:
                return value + 1
    return 0


def _is_code(paragraph: Any, style: str, styles: _Styles) -> bool:
    if style in _CODE_STYLES:
        return True
    runs = [run for run in paragraph.runs if run.text.strip()]
    return bool(runs) and all(styles.is_code_run(run) for run in runs) and "\n" in paragraph.text


def _text(paragraph: Any, styles: _Styles) -> str:
    """A paragraph's text: code runs as code spans, hyperlinks as their text."""
    from docx.text.run import Run

    parts = []
    for item in paragraph.iter_inner_content():
        if isinstance(item, Run) and item.text.strip() and styles.is_code_run(item):
            parts.append(f"`{item.text.strip()}`" if "`" not in item.text else item.text)
        else:
            parts.append(item.text)
    return "".join(parts).strip()


def _list_marker(paragraph: Any, style_ppr: Any) -> str:
    """``- `` (indented by level) for a numbered or bulleted paragraph: numbering set on
    the paragraph or by its style (``List Bullet``)."""
    for ppr in (paragraph._p.pPr, style_ppr):
        numbering = ppr.find(f"{_W}numPr") if ppr is not None else None
        if numbering is not None:
            level = numbering.find(f"{_W}ilvl")
            depth = int(level.get(f"{_W}val", "0")) if level is not None else 0
            return "  " * min(depth, 5) + "- "
    return ""


def _rows(grid: Any) -> Iterator[list[str]]:
    for row in grid.rows:
        yield [cell.text for cell in row.cells]
