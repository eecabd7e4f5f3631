"""A page read with the fragments it includes from the knowledge base's folder.

reStructuredText (``.. include::``) and AsciiDoc (``include::``) pages pull shared text
from other files (``formats.rst_includes``, ``formats.adoc_includes``); the page's text, and
with it the hash it is stored under, then holds them, so a changed fragment reads its pages
again. Other formats include nothing and are returned as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from superbiz.exceptions import DocumentError
from superbiz.knowledge.formats import ASCIIDOC_EXTENSIONS, adoc_includes, rst_includes
from superbiz.knowledge.formats.decode import decode


def with_fragments(
    data: bytes, page: PurePosixPath, base: Path, encodings: Sequence[str], max_bytes: int
) -> bytes:
    """``data``, the page at ``page`` under the folder ``base``, with the fragments it
    includes from that folder written in, as UTF-8. A fragment outside ``base`` (through a
    symlink too), missing, larger than ``max_bytes`` or unreadable is left out, as docutils
    and Asciidoctor leave it; a page that does not decode is returned as it is, for its own
    reading to say why."""
    suffix = page.suffix.lower()
    if suffix == ".rst":
        expand = rst_includes.with_includes
    elif suffix in ASCIIDOC_EXTENSIONS:
        expand = adoc_includes.with_includes
    else:
        return data
    try:
        text = decode(data, str(page), encodings)
    except DocumentError:
        return data

    def read(path: PurePosixPath) -> str | None:
        try:
            real = (base / path).resolve(strict=True)
            if not real.is_relative_to(base) or not real.is_file():
                return None
            if real.stat().st_size > max_bytes:
                return None
            return decode(real.read_bytes(), str(path), encodings)
        except (OSError, RuntimeError, DocumentError):
            return None

    expanded = expand(text, page, read, max_bytes)
    return data if expanded == text else expanded.encode()
