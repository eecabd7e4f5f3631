"""PDF with a text layer to Markdown, with pypdfium2 (PDFium's text layer, in C).

Headings come from the file's outline (bookmarks) when it has one, else from clearly
larger fonts; whole lines in a monospaced font become code blocks. Every page after
the first opens with a ``\f<page>`` line, so each chunk's heading path names the page
it starts on (``knowledge.documents.chunking``) and a citation can point there
(``manual.pdf#page=12``).

Bounded: at most ``MAX_PAGES`` pages and ``MAX_PAGE_CHARS`` characters of text a page
(a compressed content stream can expand to megabytes), checked before any text is
kept; an encrypted or corrupt file, or one without a text layer, is refused with the
reason. PDFium is not thread-safe: one conversion runs at a time.
"""

from __future__ import annotations

import ctypes
import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from superbiz.exceptions import DocumentError
from superbiz.knowledge.formats import ConvertedDocument
from superbiz.knowledge.formats._markdown import fence, heading, inline, join_blocks
from superbiz.knowledge.formats._sniff import mismatch

#: more pages than this is not a runbook; 5,000 empty pages are a few hundred KB
MAX_PAGES = 2_000
#: characters of text one page may hold (a dense A4 page has about 5,000)
MAX_PAGE_CHARS = 100_000
NO_TEXT_LAYER = "no text layer: scanned PDF, OCR is not supported"
_PAGE_LABEL = re.compile(r"^page (\d+)$")
#: a line this much larger than the body text, and short, is a heading
_HEADING_RATIO = 1.15
_HEADING_MAX_CHARS = 150
#: a metadata title that names nothing
_PLACEHOLDER_TITLE = re.compile(r"untitled(?: document)?\s*\d*", re.IGNORECASE)
#: a title page's title is among its first lines (wrapped over at most as many)
_COVER_LINES = 3
#: a gap between baselines above this many font sizes starts a new paragraph
_PARAGRAPH_GAP = 1.45
_MONO = re.compile(r"mono|courier|consol|menlo|code", re.IGNORECASE)
_BULLETS = {"•": 0, "●": 0, "▪": 1, "◦": 1, "–": 1, "○": 1, "■": 2}
_LOCK = threading.Lock()


@dataclass(slots=True)
class _Line:
    text: str
    size: float
    mono: bool
    baseline: float


def page_of(heading_path: str) -> int:
    """The page a chunk of a converted PDF starts on, from its heading path.

    >>> page_of("Install > Requirements > page 12"), page_of("Install")
    (12, 1)
    """
    last = heading_path.rsplit(" > ", 1)[-1]
    match = _PAGE_LABEL.match(last)
    return int(match.group(1)) if match else 1


def convert_pdf(data: bytes, label: str) -> ConvertedDocument:
    """Title and Markdown of a PDF's text layer."""
    if b"%PDF-" not in data[:1024]:
        raise DocumentError(label, mismatch(data, ".pdf"))
    import pypdfium2 as pdfium

    with _LOCK:
        try:
            pdf = pdfium.PdfDocument(data)
        except pdfium.PdfiumError as exc:
            raise DocumentError(label, _load_problem(str(exc))) from exc
        try:
            return _convert(pdf, label)
        finally:
            pdf.close()


def _load_problem(message: str) -> str:
    if "password" in message.lower():
        return "encrypted PDF: it needs a password, which superbiz does not have"
    detail = message.split("(PDFium: ", 1)[-1].rstrip(").")
    return f"corrupt PDF: PDFium cannot read it ({detail})"


def _convert(pdf: object, label: str) -> ConvertedDocument:
    import pypdfium2 as pdfium

    assert isinstance(pdf, pdfium.PdfDocument)
    count = len(pdf)
    if count > MAX_PAGES:
        raise DocumentError(label, f"too many pages: {count} (the limit is {MAX_PAGES})")
    pages = [_page_lines(pdf, index, label) for index in range(count)]
    if not any(line.text.strip() for page in pages for line in page):
        raise DocumentError(label, NO_TEXT_LAYER)
    outline = _outline(pdf)
    body_size = _body_size(pages)
    title = _file_title(pdf.get_metadata_dict().get("Title", ""))
    cover = None if title or not pages else _cover_title(pages[0], body_size)
    levels = _font_levels(pages, body_size) if not outline else {}
    blocks: list[str] = []
    for number, lines in enumerate(pages, start=1):
        if number == 1 and title:
            lines = lines[_title_lines(lines, title, outline.get(0, [])) :]
        if number > 1:
            blocks.append(f"\f{number}")  # where the page starts (``chunking.PAGE_BREAK``)
        blocks.extend(_blocks(lines, outline.get(number - 1, []), levels, body_size))
    return ConvertedDocument(title=title or cover, markdown=join_blocks(blocks))


def _file_title(value: str) -> str | None:
    """The title in the file's metadata, unless it is a placeholder ("untitled" is what
    reportlab writes when a program sets none).

    >>> _file_title("Cache Operations"), _file_title("untitled"), _file_title(" ")
    ('Cache Operations', None, None)
    """
    title = inline(value)
    return title if title and not _PLACEHOLDER_TITLE.fullmatch(title) else None


def _cover_title(lines: list[_Line], body: float) -> str | None:
    """The title a first page shows when the file's metadata has none: its opening lines
    in the page's largest font, clearly larger than the body text (LaTeX's title page;
    the outline starts at "1. Introduction", which titled the whole specification). The
    lines stay in the text: only the file's own title is taken out of it."""
    opening = [line for line in lines[:_COVER_LINES] if _headingish(line, body)]
    if not opening:
        return None
    largest = max(round(line.size, 1) for line in opening)
    start = next(i for i, line in enumerate(lines) if round(line.size, 1) == largest)
    words: list[str] = []
    for line in lines[start : start + _COVER_LINES]:
        if round(line.size, 1) != largest:
            break
        words.append(line.text.strip())
    return inline(" ".join(words)) or None


def _page_lines(pdf: object, index: int, label: str) -> list[_Line]:
    import pypdfium2.raw as raw

    page = pdf[index]  # type: ignore[index]
    textpage = page.get_textpage()
    try:
        chars = textpage.count_chars()
        if chars > MAX_PAGE_CHARS:
            raise DocumentError(
                label,
                f"page {index + 1} holds {chars} characters of text "
                f"(the limit is {MAX_PAGE_CHARS} a page)",
            )
        text = textpage.get_text_range() if chars else ""
        lines = []
        font = ctypes.create_string_buffer(128)
        x, y = ctypes.c_double(), ctypes.c_double()
        position = 0
        for raw_line in text.split("\r\n"):
            start = position
            position += len(raw_line) + 2
            if not raw_line.strip():
                continue
            first = start + len(raw_line) - len(raw_line.lstrip())
            last = start + len(raw_line.rstrip()) - 1
            size = raw.FPDFText_GetFontSize(textpage.raw, first)
            raw.FPDFText_GetCharOrigin(textpage.raw, first, ctypes.byref(x), ctypes.byref(y))
            mono = all(_is_mono(raw, textpage.raw, i, font) for i in (first, last))
            lines.append(_Line(raw_line, size, mono, y.value))
        return lines
    finally:
        textpage.close()
        page.close()


def _is_mono(
    raw: object, textpage: object, index: int, buffer: ctypes.Array[ctypes.c_char]
) -> bool:
    raw.FPDFText_GetFontInfo(textpage, index, buffer, len(buffer), None)  # type: ignore[attr-defined]
    return bool(_MONO.search(buffer.value.decode("latin-1")))


def _outline(pdf: object) -> dict[int, list[tuple[int, str]]]:
    """Outline entries by page index: ``(level, title)``, level 1 at the top."""
    entries: dict[int, list[tuple[int, str]]] = {}
    for bookmark in pdf.get_toc(max_depth=6):  # type: ignore[attr-defined]
        dest = bookmark.get_dest()
        index = dest.get_index() if dest is not None else None
        title = inline(bookmark.get_title() or "")
        if index is not None and title:
            entries.setdefault(index, []).append((bookmark.level + 1, title))
    return entries


def _body_size(pages: list[list[_Line]]) -> float:
    sizes: Counter[float] = Counter()
    for lines in pages:
        for line in lines:
            sizes[round(line.size, 1)] += len(line.text)
    return sizes.most_common(1)[0][0] if sizes else 0.0


def _font_levels(pages: list[list[_Line]], body: float) -> dict[float, int]:
    """Heading levels by font size, largest first, for a PDF without an outline."""
    sizes = {round(line.size, 1) for lines in pages for line in lines if _headingish(line, body)}
    return {size: level for level, size in enumerate(sorted(sizes, reverse=True)[:5], start=1)}


def _headingish(line: _Line, body: float) -> bool:
    text = line.text.strip()
    return (
        body > 0
        and line.size >= body * _HEADING_RATIO
        and not line.mono
        and len(text) <= _HEADING_MAX_CHARS
        and any(ch.isalnum() for ch in text)
    )


def _blocks(
    lines: list[_Line],
    outline: list[tuple[int, str]],
    levels: dict[float, int],
    body: float,
) -> Iterator[str]:
    """Markdown blocks of one page: headings, code blocks, list items, paragraphs."""
    pending = list(outline)
    paragraph: list[str] = []
    code: list[str] = []
    previous: _Line | None = None

    def flush_paragraph() -> Iterator[str]:
        if paragraph:
            yield _join_lines(paragraph)
            paragraph.clear()

    def flush_code() -> Iterator[str]:
        if code:
            yield fence("\n".join(code))
            code.clear()

    index = 0
    while index < len(lines):
        line = lines[index]
        text = line.text.strip()
        level, used = _heading_at(lines, index, pending, levels, body)
        if level:
            yield from flush_paragraph()
            yield from flush_code()
            yield heading(level, " ".join(ln.text.strip() for ln in lines[index : index + used]))
            index += used
            previous = None
            continue
        if line.mono:
            yield from flush_paragraph()
            code.append(line.text.rstrip())
        else:
            yield from flush_code()
            bullet = _BULLETS.get(text[:1])
            if bullet is not None or _gap(previous, line):
                yield from flush_paragraph()
            if bullet is not None:
                text = "  " * bullet + "- " + text[1:].strip()
            paragraph.append(text)
        previous = line
        index += 1
    yield from flush_paragraph()
    yield from flush_code()


def _heading_at(
    lines: list[_Line],
    index: int,
    pending: list[tuple[int, str]],
    levels: dict[float, int],
    body: float,
) -> tuple[int, int]:
    """``(level, lines used)`` when a heading starts at ``lines[index]``, else ``(0, 0)``.
    With an outline, only its titles (in order, a title wrapped over lines included)."""
    line = lines[index]
    if pending:
        # outline titles in order; one the page does not spell (a bookmark to a figure)
        # is passed over once a later one is found
        for position, (level, title) in enumerate(pending):
            used = _spelled_by(lines[index : index + 4], title)
            if used:
                del pending[: position + 1]
                return level, used
        return 0, 0
    if levels and _headingish(line, body):
        return levels.get(round(line.size, 1), 0), 1
    return 0, 0


def _gap(previous: _Line | None, line: _Line) -> bool:
    if previous is None:
        return False
    return abs(previous.baseline - line.baseline) > _PARAGRAPH_GAP * max(line.size, 1.0)


def _join_lines(lines: list[str]) -> str:
    """A paragraph's wrapped lines as one line; no space is put between two CJK
    characters (Chinese wraps anywhere)."""
    text = lines[0]
    for line in lines[1:]:
        if line.startswith(("- ", "  - ", "    - ")):
            text = f"{text}\n{line}"
        elif text and line and _cjk(text[-1]) and _cjk(line[0]):
            text += line
        else:
            text = f"{text.rstrip()} {line.lstrip()}"
    return text


def _cjk(char: str) -> bool:
    return unicodedata.east_asian_width(char) in ("W", "F")


def _title_lines(lines: list[_Line], title: str, outline: list[tuple[int, str]]) -> int:
    """How many opening lines are the title page's title: the document's title, not its
    text. Kept when they are the outline's first heading, unless the heading follows
    them (a Word title above a first heading of the same words)."""
    used = _spelled_by(lines[:4], title)
    if used and any(_same(text, title) for _, text in outline):
        return used if _spelled_by(lines[used : used + 4], title) else 0
    return used


def _spelled_by(lines: list[_Line], text: str) -> int:
    """How many of ``lines`` spell ``text`` from the first (wrapped over several, white
    space aside); 0 when they do not."""
    wanted, joined = _key(text), ""
    for used, line in enumerate(lines, start=1):
        joined += _key(line.text)
        if joined == wanted:
            return used
        if not wanted.startswith(joined):
            break
    return 0


def _key(text: str) -> str:
    return "".join(text.split()).casefold()


def _same(a: str, b: str) -> bool:
    return _key(a) == _key(b)
