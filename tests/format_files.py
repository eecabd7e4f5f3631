"""Real files in the formats superbiz converts, written by the tests with the formats'
own writers (reportlab for PDF, python-docx for Word), so no binary is committed."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Sequence

#: a PDF page: ``(kind, text)`` blocks, kind one of h1, h2, p, code
Page = Sequence[tuple[str, str]]
_FONTS = {
    "title": ("Helvetica-Bold", 24, None),  # a title page's title: large, not in the outline
    "h1": ("Helvetica-Bold", 20, 0),
    "h2": ("Helvetica-Bold", 15, 1),
    "p": ("Helvetica", 11, None),
    "code": ("Courier", 10, None),
}


def pdf_bytes(
    pages: Sequence[Page],
    *,
    title: str | None = None,
    outline: bool = True,
    user_password: str | None = None,
) -> bytes:
    """A PDF with a text layer; headings in larger bold fonts, in the outline when
    ``outline``; encrypted when ``user_password`` is given ("" = owner password only)."""
    from reportlab.lib.pdfencrypt import StandardEncryption
    from reportlab.pdfgen import canvas

    encrypt = (
        StandardEncryption(user_password, ownerPassword="owner")
        if user_password is not None
        else None
    )
    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer, encrypt=encrypt, pageCompression=1)
    if title:
        pdf.setTitle(title)
    entries = 0
    for page in pages:
        y = 800.0
        for kind, text in page:
            font, size, level = _FONTS[kind]
            if level is not None and outline:
                entries += 1
                pdf.bookmarkPage(f"h{entries}", top=y + size)
                pdf.addOutlineEntry(text, f"h{entries}", level)
            pdf.setFont(font, size)
            pdf.drawString(50, y, text)
            y -= size * 1.6
        pdf.showPage()
    pdf.save()
    return buffer.getvalue()


def scanned_pdf_bytes() -> bytes:
    """A page with a picture and no text layer, as a scanner writes it."""
    from reportlab.pdfgen import canvas

    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer)
    for row in range(40):
        pdf.rect(50, 100 + row * 15, 300 - row * 5, 8, fill=1)
    pdf.showPage()
    pdf.save()
    return buffer.getvalue()


def dense_pdf_bytes(characters: int) -> bytes:
    """One page holding ``characters`` of tiny text (compressed, a few KB on disk)."""
    from reportlab.pdfgen import canvas

    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer, pageCompression=1)
    pdf.setFont("Helvetica", 1)
    line = "y" * 200
    for row in range(characters // len(line) + 1):
        pdf.drawString(10, 10 + row * 1.0, line)
    pdf.showPage()
    pdf.save()
    return buffer.getvalue()


def docx_bytes(*, title: str | None = None, with_table: bool = True) -> bytes:
    """A Word document: a Title, headings by style, a table, a code paragraph in a
    monospaced font, a list and body text."""
    import docx
    from docx.shared import Pt

    document = docx.Document()
    if title:
        document.add_heading(title, level=0)  # the Title style
    document.add_heading("Failover", level=1)
    document.add_paragraph("Promote a replica when the primary is lost.")
    document.add_paragraph("check the sentinel quorum", style="List Bullet")
    code = document.add_paragraph()
    for number, line in enumerate(["redis-cli -p 26379 SENTINEL failover mymaster", "  echo done"]):
        run = code.add_run(line)
        run.font.name = "Courier New"
        run.font.size = Pt(9)
        if number == 0:
            run.add_break()
    document.add_heading("Limits", level=2)
    if with_table:
        grid = document.add_table(rows=3, cols=2)
        for row, (key, value) in enumerate(
            [("setting", "value"), ("maxclients", "10000"), ("timeout", "0 | never")]
        ):
            grid.cell(row, 0).text = key
            grid.cell(row, 1).text = value
    document.add_paragraph("Past the limit clients get ERR max number of clients reached.")
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def zip_bomb_docx_bytes(unzipped: int) -> bytes:
    """A .docx-shaped zip whose document part unzips to ``unzipped`` bytes."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("word/document.xml", b" " * unzipped)
    return buffer.getvalue()
