"""PDF with a text layer → the Markdown structure: real PDFs written by reportlab, read
by PDFium. Headings from the outline or the fonts, code from monospaced lines, page
markers for citations, and every bad PDF refused with its reason."""

from __future__ import annotations

import pytest

from format_files import dense_pdf_bytes, pdf_bytes, scanned_pdf_bytes
from superbiz.exceptions import DocumentError
from superbiz.knowledge.documents.chunking import chunk_markdown
from superbiz.knowledge.formats.pdf import (
    MAX_PAGE_CHARS,
    MAX_PAGES,
    NO_TEXT_LAYER,
    convert_pdf,
    page_of,
)

RUNBOOK = [
    [
        ("h1", "Redis Runbook"),
        ("p", "Redis serves the session cache."),
        ("h2", "Failover"),
        ("p", "Promote a replica when the primary is lost."),
        ("code", "redis-cli -p 26379 SENTINEL failover mymaster"),
        ("code", "redis-cli -p 26379 SENTINEL masters"),
    ],
    [("p", "The clients reconnect by themselves."), ("h2", "Limits"), ("p", "maxclients is 10000")],
]


def reason(data: bytes, name: str = "manual.pdf") -> str:
    with pytest.raises(DocumentError) as caught:
        convert_pdf(data, name)
    return caught.value.reason


@pytest.mark.parametrize("outline", [True, False], ids=["outline", "fonts"])
def test_headings_come_from_the_outline_or_from_larger_fonts(outline: bool) -> None:
    converted = convert_pdf(pdf_bytes(RUNBOOK, outline=outline), "manual.pdf")

    body = converted.markdown
    assert "# Redis Runbook\n" in body
    assert "## Failover\n" in body and "## Limits\n" in body
    assert "```\nredis-cli -p 26379 SENTINEL failover mymaster\n" in body
    assert "redis-cli -p 26379 SENTINEL masters\n```" in body
    paths = {chunk.heading for chunk in chunk_markdown(body, size=120, overlap=20)}
    assert "Redis Runbook > Failover" in paths


def test_the_document_title_is_the_files_title_and_not_repeated_as_text() -> None:
    pages = [[("h1", "Cache Operations"), ("p", "Body text of the manual.")]]
    converted = convert_pdf(pdf_bytes(pages, title="Cache Operations", outline=False), "m.pdf")

    assert converted.title == "Cache Operations"
    assert converted.markdown.strip() == "Body text of the manual."


def test_a_title_page_title_above_a_first_heading_of_the_same_words_is_not_repeated() -> None:
    # what LibreOffice makes of a Word runbook: a Title paragraph, then Heading 1 with the
    # same words in the outline
    pages = [[("h1", "Cache Operations"), ("h1", "Cache Operations"), ("p", "Body text.")]]
    converted = convert_pdf(pdf_bytes(pages, title="Cache Operations"), "m.pdf")

    assert converted.markdown == "# Cache Operations\n\nBody text.\n"


@pytest.mark.parametrize("outline", [True, False], ids=["outline", "fonts"])
def test_without_a_title_in_the_file_the_title_pages_title_names_it(outline: bool) -> None:
    """LaTeX's title page without a PDF title: the outline starts at "1. Introduction",
    which titled the whole shared-mime-info specification."""
    pages = [
        [
            ("title", "Shared MIME-info"),
            ("title", "Database"),
            ("p", "X Desktop Group"),
            ("h1", "1. Introduction"),
            ("p", "Many programs need to know the type of a file."),
        ]
    ]
    converted = convert_pdf(pdf_bytes(pages, outline=outline), "spec.pdf")

    assert converted.title == "Shared MIME-info Database"
    assert "1. Introduction" in converted.markdown
    # a first page that opens with its first heading is titled by it, as before
    plain = convert_pdf(pdf_bytes(RUNBOOK, outline=outline), "manual.pdf")
    assert plain.title == "Redis Runbook" and "# Redis Runbook\n" in plain.markdown


def test_each_page_after_the_first_is_named_in_the_heading_path_of_its_chunks() -> None:
    converted = convert_pdf(pdf_bytes(RUNBOOK), "manual.pdf")

    chunks = chunk_markdown(converted.markdown, size=100, overlap=10)

    def page(sentence: str) -> int:
        return next(page_of(chunk.heading) for chunk in chunks if sentence in chunk.text)

    assert page("Promote a replica when the primary is lost.") == 1
    assert page("The clients reconnect by themselves.") == 2
    assert page("maxclients is 10000") == 2  # under "Limits", on page 2


def test_a_pdf_without_a_text_layer_is_refused_as_a_scan() -> None:
    assert reason(scanned_pdf_bytes()) == NO_TEXT_LAYER
    assert NO_TEXT_LAYER == "no text layer: scanned PDF, OCR is not supported"


def test_an_encrypted_pdf_is_refused_and_one_with_only_an_owner_password_is_read() -> None:
    assert reason(pdf_bytes(RUNBOOK, user_password="secret")) == (
        "encrypted PDF: it needs a password, which superbiz does not have"
    )
    readable = convert_pdf(pdf_bytes(RUNBOOK, user_password=""), "manual.pdf")
    assert "Promote a replica" in readable.markdown


def test_a_corrupt_or_truncated_pdf_is_refused() -> None:
    assert reason(b"%PDF-1.4\n" + bytes(range(256)) * 8).startswith("corrupt PDF: ")
    assert reason(pdf_bytes(RUNBOOK)[:700]).startswith("corrupt PDF: ")


def test_a_pdf_of_five_thousand_pages_is_refused_before_any_page_is_read() -> None:
    pages = [[("p", f"page {n}")] for n in range(5000)]
    assert reason(pdf_bytes(pages, outline=False)) == (
        f"too many pages: 5000 (the limit is {MAX_PAGES})"
    )


def test_a_page_that_expands_to_megabytes_of_text_is_refused() -> None:
    data = dense_pdf_bytes(MAX_PAGE_CHARS + 20_000)
    assert len(data) < 20_000  # a small file…
    assert reason(data).startswith("page 1 holds ")  # …whose page is bounded
    assert reason(data).endswith(f"characters of text (the limit is {MAX_PAGE_CHARS} a page)")


def test_a_file_that_is_not_a_pdf_is_named_for_what_it_is() -> None:
    assert reason(b"PK\x03\x04" + bytes(100)) == (
        "the extension lies: its content is a zip archive (a .docx is one), not a .pdf file"
    )
    assert reason(b"# just markdown\n") == (
        "the extension lies: its content does not match, not a .pdf file"
    )
