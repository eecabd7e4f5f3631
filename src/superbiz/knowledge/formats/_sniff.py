"""What a file's first bytes say it is, so that a file whose extension lies about its
content is refused with both names instead of being read as the wrong thing."""

from __future__ import annotations

_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"%PDF-", "a PDF document"),
    (b"PK\x03\x04", "a zip archive (a .docx is one)"),
    (b"PK\x05\x06", "an empty zip archive"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an old Office file (.doc/.xls, OLE2)"),
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"\x7fELF", "an executable (ELF)"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"{\\rtf", "an RTF document"),
)
_DOCUMENTS = frozenset(kind for magic, kind in _MAGIC[:4] if magic)
#: a PDF's header may follow up to 1 KiB of junk (readers accept it there)
_PDF_WINDOW = 1024


def binary_kind(data: bytes) -> str | None:
    """The kind of binary file ``data`` starts like, or None for anything else (text).

    >>> binary_kind(b"%PDF-1.7 ..."), binary_kind(b"# Title")
    ('a PDF document', None)
    """
    if b"%PDF-" in data[:_PDF_WINDOW]:
        return "a PDF document"
    for magic, kind in _MAGIC:
        if data.startswith(magic):
            return kind
    return None


def document_kind(data: bytes) -> str | None:
    """The kind of document file ``data`` is when it is one a text file is mistaken for
    (a PDF, a .docx or another zip, an old Office file); images and other binaries are
    left to the text reader's "binary file" refusal."""
    kind = binary_kind(data)
    return kind if kind in _DOCUMENTS else None


def mismatch(data: bytes, suffix: str) -> str:
    """The skip reason for a file whose content is not what ``suffix`` says, naming what
    it looks like when that is known."""
    kind = binary_kind(data)
    seen = f"its content is {kind}" if kind else "its content does not match"
    return f"the extension lies: {seen}, not a {suffix} file"
