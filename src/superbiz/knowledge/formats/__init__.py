"""Formats other than Markdown, each converted to the Markdown the chunker reads.

A converter takes a file's bytes and returns its title and a Markdown body: headings
as ``#`` lines (so every chunk keeps its heading path), tables as pipe tables, code
verbatim in fences, links as their text. Everything after that — frontmatter-free
documents, chunking, search — is the Markdown path, unchanged. A file that cannot be
converted raises ``DocumentError`` with the reason; nothing in a file is executed, every
converter bounds what a small file can expand to (pages, characters, zip entries), and
every conversion runs in a child process whose memory and time are capped
(``formats._isolated``: ``ingest.convert-memory-mb``, ``ingest.convert-timeout-s``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from superbiz.exceptions import DocumentError
from superbiz.knowledge.formats._isolated import DEFAULT_LIMITS, ConversionLimits, converter
from superbiz.knowledge.formats._sniff import document_kind


@dataclass(frozen=True, slots=True)
class ConvertedDocument:
    """A converted file: its title when the file names one, and its Markdown body."""

    title: str | None
    markdown: str


Converter = Callable[[bytes, str, Sequence[str]], ConvertedDocument]

#: Markdown and plain text are read as they are (``knowledge.documents.document``)
TEXT_EXTENSIONS = (".md", ".mdx", ".markdown", ".txt")
#: AsciiDoc pages (read with the fragments they include, ``formats.adoc_includes``)
ASCIIDOC_EXTENSIONS = (".adoc", ".asciidoc")


def _html(data: bytes, label: str, encodings: Sequence[str]) -> ConvertedDocument:
    from superbiz.knowledge.formats.html import convert_html

    return convert_html(data, label, encodings)


def _pdf(data: bytes, label: str, encodings: Sequence[str]) -> ConvertedDocument:
    from superbiz.knowledge.formats.pdf import convert_pdf

    return convert_pdf(data, label)


def _docx(data: bytes, label: str, encodings: Sequence[str]) -> ConvertedDocument:
    from superbiz.knowledge.formats.docx import convert_docx

    return convert_docx(data, label)


def _asciidoc(data: bytes, label: str, encodings: Sequence[str]) -> ConvertedDocument:
    from superbiz.knowledge.formats.asciidoc import convert_asciidoc

    return convert_asciidoc(data, label, encodings)


def _rst(data: bytes, label: str, encodings: Sequence[str]) -> ConvertedDocument:
    from superbiz.knowledge.formats.rst import convert_rst

    return convert_rst(data, label, encodings)


#: converted formats by extension (each library imported on first use)
CONVERTERS: dict[str, Converter] = {
    ".html": _html,
    ".htm": _html,
    ".pdf": _pdf,
    ".docx": _docx,
    ".rst": _rst,
    ".adoc": _asciidoc,
    ".asciidoc": _asciidoc,
}


#: Each reader's version. Raise a reader's number whenever it reads the same bytes into
#: other text: a stored document's hash names the version that read it, so the next
#: ingest reads that format's files again instead of keeping an older reader's text.
READER_VERSIONS: dict[str, int] = {
    "markdown": 16,
    "html": 4,
    "pdf": 2,
    "docx": 2,
    "rst": 6,
    "asciidoc": 6,
}
_READERS = {
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
    ".docx": "docx",
    ".rst": "rst",
    ".adoc": "asciidoc",
    ".asciidoc": "asciidoc",
}


def reader_of(suffix: str) -> str:
    """The reader of a file with extension ``suffix``, with its version.

    >>> reader_of(".HTM"), reader_of(".txt")
    ('html 4', 'markdown 16')
    """
    name = _READERS.get(suffix.lower(), "markdown")
    return f"{name} {READER_VERSIONS[name]}"


def convert(
    data: bytes,
    suffix: str,
    label: str,
    encodings: Sequence[str],
    limits: ConversionLimits = DEFAULT_LIMITS,
) -> ConvertedDocument | None:
    """``data`` converted by the converter of ``suffix``; None for a text format (Markdown,
    plain text), which is read as it is once its content is known to be text. The
    conversion runs in a child process bounded by ``limits`` (memory and time,
    ``formats._isolated``); a file that needs more is refused with the reason."""
    key = suffix.lower()
    if key not in CONVERTERS:
        kind = document_kind(data)
        if kind:
            raise DocumentError(
                label, f"the extension lies: its content is {kind}, not {suffix or 'text'}"
            )
        return None
    title, markdown = converter.convert(key, data, label, encodings, limits)
    return ConvertedDocument(title=title, markdown=markdown)
