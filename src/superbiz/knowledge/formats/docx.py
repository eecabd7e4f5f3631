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


def _read(document: Any) -> tuple[str | None, list[str]]:
    from docx.table import Table

    title: str | None = None
    blocks: list[str] = []
    code: list[str] = []
    for item in document.iter_inner_content():
        if not isinstance(item, Table) and _is_code(item):
            code.append(item.text)
            continue
        if code:
            blocks.append(fence("\n".join(code)))
            code = []
        if isinstance(item, Table):
            blocks.append(table(list(_rows(item))))
            continue
        style = (item.style.name if item.style is not None else "") or ""
        if style.lower() == "title" and title is None:
            title = inline(item.text) or None
            continue
        level = _heading_level(item, style)
        if level:
            blocks.append(heading(level, item.text))
        elif text := _text(item):
            blocks.append(_list_marker(item) + text)
    if code:
        blocks.append(fence("\n".join(code)))
    return title, blocks


def _heading_level(paragraph: Any, style: str) -> int:
    match = _HEADING_STYLE.match(style.strip())
    if match:
        return int(match.group(1))
    for element in (paragraph._p.pPr, _style_ppr(paragraph)):
        level = element.find(f"{_W}outlineLvl") if element is not None else None
        if level is not None:
            value = int(level.get(f"{_W}val", "9"))
            if value < 6:
                return value + 1
    return 0


def _style_ppr(paragraph: Any) -> Any:
    style = paragraph.style
    return style.element.pPr if style is not None else None


def _is_code(paragraph: Any) -> bool:
    style = (paragraph.style.name if paragraph.style is not None else "") or ""
    if style.lower() in _CODE_STYLES:
        return True
    runs = [run for run in paragraph.runs if run.text.strip()]
    return bool(runs) and all(_code_run(run) for run in runs) and "\n" in paragraph.text


def _code_run(run: Any) -> bool:
    name = (run.style.name if run.style is not None else "") or ""
    return name.lower() in _CODE_RUN_STYLES or bool(_MONO.search(run.font.name or ""))


def _text(paragraph: Any) -> str:
    """A paragraph's text: code runs as code spans, hyperlinks as their text."""
    from docx.text.run import Run

    parts = []
    for item in paragraph.iter_inner_content():
        if isinstance(item, Run) and item.text.strip() and _code_run(item):
            parts.append(f"`{item.text.strip()}`" if "`" not in item.text else item.text)
        else:
            parts.append(item.text)
    return "".join(parts).strip()


def _list_marker(paragraph: Any) -> str:
    """``- `` (indented by level) for a numbered or bulleted paragraph: numbering set on
    the paragraph or by its style (``List Bullet``)."""
    for ppr in (paragraph._p.pPr, _style_ppr(paragraph)):
        numbering = ppr.find(f"{_W}numPr") if ppr is not None else None
        if numbering is not None:
            level = numbering.find(f"{_W}ilvl")
            depth = int(level.get(f"{_W}val", "0")) if level is not None else 0
            return "  " * min(depth, 5) + "- "
    return ""


def _rows(grid: Any) -> Iterator[list[str]]:
    for row in grid.rows:
        yield [cell.text for cell in row.cells]
