"""Files that inflate far beyond their size, and a large legitimate PDF, written here
(nothing binary is shipped): what ``superbiz eval bombs`` ingests and the tests convert.

* ``pdf_stream_bomb``: one page whose content stream is ``b"q Q " * repeats`` deflated
  (300 million: 1.17 MB on disk, 1.2 GB inflated; PDFium took it to 2.2 GB);
* ``docx_bomb``: a .docx whose ``word/document.xml`` holds ``paragraphs`` tiny
  paragraphs (1.4 million: 172 KB zipped, 47 MB of XML, under the 50 MB zip-directory
  bound; python-docx took it to 843 MB and 255 s);
* ``html_entity_bomb``: "billion laughs" entities in an HTML page's DOCTYPE and a body of
  entity and character references up to ``size`` bytes;
* ``text_pdf``: a PDF of ``pages`` pages of text in a standard font (no reportlab).
"""

from __future__ import annotations

import io
import zipfile
import zlib

_PDF_FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"


def _pdf(objects: list[bytes]) -> bytes:
    """A PDF of ``objects`` (object 1 the catalog), with its cross-reference table."""
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def _stream(data: bytes, compressed: bool = True) -> bytes:
    body = zlib.compress(data, 9) if compressed else data
    flate = b" /Filter /FlateDecode" if compressed else b""
    return b"<< /Length %d%s >>\nstream\n" % (len(body), flate) + body + b"\nendstream"


def pdf_stream_bomb(repeats: int = 300_000_000) -> bytes:
    """One page whose content stream inflates to ``4 * repeats`` bytes of ``q Q``."""
    packer = zlib.compressobj(9)
    block = b"q Q " * 1_000_000
    parts = [packer.compress(block) for _ in range(repeats // 1_000_000)]
    parts.append(packer.compress(b"q Q " * (repeats % 1_000_000)))
    parts.append(packer.flush())
    content = b"".join(parts)
    stream = b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(content)
    return _pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
            stream + content + b"\nendstream",
        ]
    )


def text_pdf(pages: int = 2000, lines: int = 6) -> bytes:
    """``pages`` pages, each a heading and ``lines`` lines of text (Helvetica)."""
    objects: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>", b"", _PDF_FONT]
    kids = []
    for page in range(1, pages + 1):
        text = [b"BT /F1 16 Tf 72 760 Td (Section %d: gateway runbook) Tj ET" % page]
        for line in range(lines):
            text.append(
                b"BT /F1 10 Tf 72 %d Td (Step %d: check pool %d, restart worker %d.) Tj ET"
                % (730 - 16 * line, line + 1, page, line)
            )
        objects.append(_stream(b"\n".join(text)))
        content = len(objects)
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % content
        )
        kids.append(b"%d 0 R" % len(objects))
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(kids), pages)
    return _pdf(objects)


def docx_bomb(paragraphs: int = 1_400_000) -> bytes:
    """A .docx (python-docx's own template) whose document part holds ``paragraphs``
    one-letter paragraphs: a few hundred KB zipped, tens of MB of XML."""
    import docx

    template = io.BytesIO()
    docx.Document().save(template)
    body = b"<w:p><w:r><w:t>a</w:t></w:r></w:p>" * paragraphs
    document = (
        b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
        b'<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
        b"<w:body>" + body + b"</w:body></w:document>"
    )
    out = io.BytesIO()
    with (
        zipfile.ZipFile(template) as source,
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as target,
    ):
        for info in source.infolist():
            data = document if info.filename == "word/document.xml" else source.read(info)
            target.writestr(info.filename, data)
    return out.getvalue()


def html_entity_bomb(size: int = 4_900_000) -> bytes:
    """Ten levels of ten entities in the DOCTYPE (10^10 "lol"s if expanded), then a body
    of references to them and of character references, up to ``size`` bytes."""
    entities = ['<!ENTITY lol0 "lol">'] + [
        f'<!ENTITY lol{level} "{f"&lol{level - 1};" * 10}">' for level in range(1, 10)
    ]
    head = f"<!DOCTYPE html [{''.join(entities)}]><html><head><title>Bomb</title></head><body><p>"
    unit = "&lol9;&#x4e2d;&amp;&nbsp;"
    tail = "</p></body></html>"
    count = max(1, (size - len(head) - len(tail)) // len(unit))
    return (head + unit * count + tail).encode()
