"""Word .docx → the Markdown structure: real documents written by python-docx. Headings
from styles, tables kept, code verbatim; what is not a .docx, or would unzip into a
bomb, is refused from the zip directory before anything is read."""

from __future__ import annotations

import io
import zipfile

import docx
import pytest

from format_files import docx_bytes, pdf_bytes, zip_bomb_docx_bytes
from superbiz.exceptions import DocumentError
from superbiz.knowledge.documents.chunking import chunk_markdown
from superbiz.knowledge.formats.docx import MAX_UNZIPPED_BYTES, convert_docx


def reason(data: bytes) -> str:
    with pytest.raises(DocumentError) as caught:
        convert_docx(data, "runbook.docx")
    return caught.value.reason


def test_headings_from_styles_tables_code_and_lists() -> None:
    converted = convert_docx(docx_bytes(title="Redis Runbook"), "runbook.docx")

    assert converted.title == "Redis Runbook"
    body = converted.markdown
    assert body.startswith("# Failover\n")
    assert "## Limits\n" in body
    assert "- check the sentinel quorum\n" in body
    assert "```\nredis-cli -p 26379 SENTINEL failover mymaster\n  echo done\n```" in body
    assert (
        "| setting | value |\n| --- | --- |\n| maxclients | 10000 |\n| timeout | 0 \\| never |"
    ) in body
    headings = [chunk.heading for chunk in chunk_markdown(body, size=150, overlap=20)]
    assert "Failover > Limits" in headings


def test_the_title_falls_back_to_the_documents_properties() -> None:
    document = docx.Document(io.BytesIO(docx_bytes()))
    document.core_properties.title = "From the properties"
    buffer = io.BytesIO()
    document.save(buffer)

    assert convert_docx(buffer.getvalue(), "runbook.docx").title == "From the properties"


def test_a_file_that_is_not_a_zip_is_refused() -> None:
    assert reason(b"Just some text, saved with the wrong name.") == (
        "not a Word .docx: not a zip archive"
    )


def test_a_file_whose_extension_lies_is_named_for_what_it_is() -> None:
    assert reason(pdf_bytes([[("p", "text")]])) == (
        "the extension lies: its content is a PDF document, not a .docx file"
    )
    assert reason(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(600)) == (
        "the extension lies: its content is an old Office file (.doc/.xls, OLE2), not a .docx file"
    )


def test_a_zip_bomb_is_refused_from_its_directory_before_it_is_unzipped() -> None:
    data = zip_bomb_docx_bytes(MAX_UNZIPPED_BYTES + 1_000_000)
    assert len(data) < 200_000  # 51 MB of spaces compress to almost nothing

    assert reason(data) == (
        f"zip bomb refused: its parts unzip to {MAX_UNZIPPED_BYTES + 1_000_000 + 8} bytes "
        f"(the limit is {MAX_UNZIPPED_BYTES})"
    )


def test_a_zip_that_is_not_a_word_document_is_refused() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("xl/workbook.xml", "<workbook/>")
    assert reason(buffer.getvalue()) == (
        "not a Word .docx: a zip archive without word/document.xml"
    )


def test_a_damaged_document_part_is_refused_as_corrupt() -> None:
    original = zipfile.ZipFile(io.BytesIO(docx_bytes()))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for item in original.infolist():
            data = original.read(item)
            if item.filename == "word/document.xml":
                data = data[: len(data) // 2]  # cut in the middle of the XML
            archive.writestr(item, data)
    assert reason(buffer.getvalue()).startswith("corrupt Word file: ")
