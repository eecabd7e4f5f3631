"""A stored document as it was ingested: its text, and the page a passage of it sits on.

What lies above the knowledge base (the HTTP service's document and passage routes, the
governed lookup's citations) asks here rather than of the converters: which formats are
converted, and how a PDF's pages are marked, are the knowledge base's own
(``superbiz.knowledge.formats``).
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from superbiz.config import IngestSettings
from superbiz.exceptions import DocumentError
from superbiz.knowledge.documents.document import conversion_limits, parse_document
from superbiz.knowledge.formats import CONVERTERS
from superbiz.knowledge.formats._html_blocks import (
    collapsible_sections_opened,
    layout_lines_dropped,
)
from superbiz.knowledge.formats._shortcodes import shortcodes_as_rendered
from superbiz.storage.repository import StoredDocument


def document_text(stored: StoredDocument, settings: IngestSettings) -> str | None:
    """The document's file as text: Markdown as written, a converted format (PDF, Word,
    HTML, reStructuredText) as the Markdown it was converted to, never its raw bytes;
    None when the file is gone (deleted or moved since) or no longer converts."""
    path = Path(stored.source_file)
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if path.suffix.lower() not in CONVERTERS:
        return data.decode("utf-8", errors="replace")
    try:
        limits = conversion_limits(settings)
        return parse_document(data, PurePosixPath(stored.path), settings.encodings, limits).body
    except DocumentError:
        return None


def cited_page(path: str, heading_path: str) -> int | None:
    """The page a chunk of a converted PDF starts on (its heading path names it, see
    ``formats.pdf``); None for any other document.

    >>> cited_page("manual.pdf", "Install > page 12"), cited_page("a.md", "page 12")
    (12, None)
    """
    if not path.lower().endswith(".pdf"):
        return None
    from superbiz.knowledge.formats.pdf import page_of

    return page_of(heading_path)


def as_rendered(text: str) -> str:
    """A stored passage as a renderer shows the markup its text keeps, for a quote a person
    reads: Hugo's shortcode lines (``{{< copyable "shell-regular" >}}``) as nothing and
    its ``ref`` link targets as the pages they name, ``<details>`` sections with their
    summary as a label, lines of HTML tags alone (a centred logo, ``</div>``) as nothing,
    and no thematic break (``---``) after the end.
    The stored text keeps them because search reads it: read as rendered, TiDB's pages
    moved dev's levels (docs/benchmarks/answers.md, "A Chinese documentation site").

    >>> as_rendered('<details><summary>TiUP</summary>\\n{{< copyable "shell-regular" >}}\\ntiup -v')
    '**TiUP**\\n\\ntiup -v'
    >>> as_rendered('<p align="center">\\n<img src="a.png" />\\n</p>\\nA：改小。\\n\\n---\\n')
    'A：改小。'
    """
    shown = layout_lines_dropped(shortcodes_as_rendered(collapsible_sections_opened(text)))
    return _THEMATIC_BREAK_AT_END.sub("", shown).rstrip() if shown.strip() else shown


#: a thematic break (``---``, ``***``, ``___``) ending a text, with the blank lines around it
_THEMATIC_BREAK_AT_END = re.compile(r"(?:\n[ \t]*(?:-{3,}|\*{3,}|_{3,})[ \t]*)+\s*\Z")
