"""Bytes to text: the one decoding every text format shares (Markdown, HTML, RST, AsciiDoc).

Here, beside the converters, so that a converter and the document reader use the same
rules without importing each other.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Sequence

from superbiz._text import CONTROL_CHARACTERS
from superbiz.exceptions import DocumentError
from superbiz.knowledge.formats._sniff import binary_kind

DEFAULT_ENCODINGS = ("utf-8",)
# Byte-order marks, longest first (a UTF-32 LE mark starts like a UTF-16 LE one).
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
#: the shortest file that may be called UTF-16 text without a byte-order mark (4 characters)
UTF16_MIN_BYTES = 8


def decode(data: bytes, label: str, encodings: Sequence[str] = DEFAULT_ENCODINGS) -> str:
    """Text of ``data``: by its byte-order mark (UTF-8, UTF-16, UTF-32), else by the first
    of ``encodings`` that decodes it; a refusal names the likely encoding and the fix."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            name = codec.removesuffix("-sig").upper()
            try:
                return data.decode(codec)
            except UnicodeDecodeError as exc:
                raise DocumentError(
                    label, f"not {name} text despite its {name} byte-order mark (byte {exc.start})"
                ) from exc
    if b"\x00" in data[:8192]:
        raise DocumentError(label, "binary file (contains NUL bytes)" + _utf16_hint(data))
    problem: UnicodeDecodeError | None = None
    for encoding in encodings:
        try:
            return data.decode("utf-8-sig" if codecs.lookup(encoding).name == "utf-8" else encoding)
        except UnicodeDecodeError as exc:
            problem = problem or exc
    assert problem is not None  # settings require at least one encoding
    names = " or ".join(codecs.lookup(e).name.upper() for e in encodings)
    reason = f"not {names} text (byte {problem.start}: {problem.reason})"
    raise DocumentError(label, reason + _gb18030_hint(data))


def markup_text(data: bytes, label: str, encodings: Sequence[str], markup: str) -> str:
    """The text of a file of ``markup`` (``.rst``, ``AsciiDoc``), its lines ended by
    ``\\n``; a file whose bytes are a binary format's, or whose text holds NUL
    characters, is refused with the reason."""
    kind = binary_kind(data)
    if kind:
        raise DocumentError(label, f"the extension lies: its content is {kind}, not {markup}")
    text = decode(data, label, encodings).replace("\r\n", "\n")
    if "\x00" in text:
        raise DocumentError(label, "contains NUL characters (U+0000): binary or corrupted text")
    return text


def _gb18030_hint(data: bytes) -> str:
    """A hint when the bytes decode as GB18030 (which includes GBK) to Chinese."""
    try:
        chinese = re.search(r"[\u4e00-\u9fff]", data.decode("gb18030")) is not None
    except UnicodeDecodeError:
        return ""
    if not chinese:
        return ""
    return (
        "; it looks like GB18030/GBK Chinese: convert it with "
        "`iconv -f GB18030 -t UTF-8 FILE > FILE.utf8` or add gb18030 to ingest.encodings"
    )


def _utf16_hint(data: bytes) -> str:
    """A hint when the NUL bytes sit where UTF-16 without a byte-order mark puts them and
    the bytes read as text in it: a few bytes of binary (``00 01 02 03 04``) match the
    NUL pattern by chance, so an odd length, under ``UTF16_MIN_BYTES`` or control
    characters once decoded get no hint."""
    head = data[:8192]
    if len(data) % 2 or len(data) < UTF16_MIN_BYTES:
        return ""
    even, odd = head[0::2].count(0), head[1::2].count(0)
    if max(even, odd) < len(head) // 4 or min(even, odd) > max(even, odd) // 10:
        return ""
    source = "UTF-16LE" if odd > even else "UTF-16BE"
    if CONTROL_CHARACTERS.search(head.decode(source.lower(), errors="ignore")):
        return ""
    return (
        f"; it looks like {source} without a byte-order mark: "
        f"convert it with `iconv -f {source} -t UTF-8`"
    )
