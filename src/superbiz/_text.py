"""Text helpers shared by ingestion, the exact index and the normaliser (no I/O)."""

from __future__ import annotations

import re
import unicodedata
from typing import Literal

Language = Literal["zh", "en"]

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN = re.compile(r"[A-Za-z]")


def normalize(text: str) -> str:
    """NFKC + case-fold + collapsed whitespace: the form exact matching compares."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def is_cjk(char: str) -> bool:
    return bool(_CJK.match(char))


def detect_language(text: str) -> Language:
    """``zh`` when CJK characters make up at least a fifth of the letters, else ``en``.

    >>> detect_language("支付失败怎么办"), detect_language("Redis 连接池 exhausted pool")
    ('zh', 'zh')
    >>> detect_language("payment failed")
    'en'
    """
    cjk = len(_CJK.findall(text))
    latin = len(_LATIN.findall(text))
    return "zh" if cjk and cjk * 5 >= cjk + latin else "en"
