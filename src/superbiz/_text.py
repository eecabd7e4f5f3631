"""Text helpers shared by ingestion, the exact index and the normaliser (no I/O)."""

from __future__ import annotations

import logging
import os
import re
import unicodedata
from functools import cache
from types import ModuleType
from typing import Literal

Language = Literal["zh", "en"]

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_WORD = re.compile(r"[A-Za-z]+")


# Words too common to identify a document or to count as a question's key term.
STOP_WORDS = frozenset(
    """
    the and for with from that this what which when where how why who are was were
    can could should would does did not any all how-to guide faq doc docs document
    readme overview general misc other notes index error errors issue issues problem
    问题 如何 怎么 怎么办 什么 为什么 是否 可以 哪些 哪个 以及 或者 如果 使用 相关 说明
    文档 介绍 概述 常见问题 注意事项 其他 方法 处理 解决 是不是 怎样 有没有 一下 需要 应该
    我们 你们 这个 那个 时候 出现 导致
    """.split()
)
_EN_WORD = re.compile(r"[a-z][a-z0-9_.-]*[a-z0-9]|[a-z]")


def key_terms(text: str) -> list[str]:
    """The words of ``text`` that carry meaning, in order, without repeats: jieba words
    of two or more CJK characters and Latin words of three or more letters, stop words
    removed. Used to match questions to passages without any index.

    >>> key_terms("支付回调超时，是不是 Redis 连接池的问题？")
    ['支付', '回调', '超时', 'redis', '连接池']
    """
    terms: list[str] = []
    for token in segmenter().cut(normalize(text)):
        token = token.strip()
        if not token or token in STOP_WORDS:
            continue
        cjk = sum(1 for ch in token if is_cjk(ch))
        if cjk >= 2 or (not cjk and _EN_WORD.fullmatch(token) and len(token) >= 3):
            terms.append(token)
    return list(dict.fromkeys(terms))


@cache
def segmenter() -> ModuleType:
    """jieba, imported on first use (it loads its dictionary), kept quiet, and caching its
    dictionary in a file of this user's: the shared ``/tmp/jieba.cache`` of another user
    cannot be written and jieba printed a traceback for it. Every use of jieba here goes
    through this (Milvus Lite's analyzer shares the same tokenizer)."""
    import jieba

    jieba.setLogLevel(logging.WARNING)
    if jieba.dt.cache_file is None and hasattr(os, "getuid"):
        jieba.dt.cache_file = f"jieba.u{os.getuid()}.cache"
    module: ModuleType = jieba
    return module


def load_segmenter() -> None:
    """Load jieba's dictionary now (about 1 s) rather than on the first Chinese text;
    Milvus Lite's BM25 analyzer segments with the same jieba."""
    segmenter().initialize()


#: control characters other than tab and line breaks: PostgreSQL refuses NUL in text,
#: and an escape sequence printed back would act on the reader's terminal
CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
#: the longest question a turn takes, and the longest query a lookup takes, from every
#: entry point (a model's, an MCP client's or a person's): past it a lookup's embedding,
#: BM25 analysis and exact matching grow with the text (475,000 characters took 24 s)
MAX_QUESTION_CHARS = 4000


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, an ellipsis marking the cut.

    >>> clip("abcdef", 4)
    'abc…'
    """
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


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
