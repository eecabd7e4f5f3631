"""Text helpers shared by ingestion, the exact index and the normaliser (no I/O)."""

from __future__ import annotations

import re
import unicodedata
from typing import Literal

Language = Literal["zh", "en"]

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_WORD = re.compile(r"[A-Za-z]+")


def normalize(text: str) -> str:
    """NFKC + case-fold + collapsed whitespace: the form exact matching compares."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def is_cjk(char: str) -> bool:
    return bool(_CJK.match(char))


def detect_language(text: str) -> Language:
    """``zh`` when there are at least as many CJK characters as Latin words, else ``en``
    (a Chinese character carries about as much as an English word).

    >>> detect_language("支付失败怎么办"), detect_language("Redis 连接池 exhausted pool")
    ('zh', 'zh')
    >>> detect_language("payment failed"), detect_language("What does 幂等 mean for refunds")
    ('en', 'en')
    """
    cjk = len(_CJK.findall(text))
    return "zh" if cjk and cjk >= len(_LATIN_WORD.findall(text)) else "en"
