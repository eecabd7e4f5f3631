"""L0: the exact-term index over document titles, aliases, ``covers`` and ``tags``.

A key matches when it occurs in the query (after NFKC + case-fold) on word
boundaries: Latin keys between non-alphanumerics, Chinese keys on jieba token
boundaries of the query, so ``数据`` does not match inside ``数据库``. Only specific
keys are indexed: not a stop word, and at least 2 CJK characters or 3 Latin letters.
Matches are ranked by field strength; the count that the normaliser uses is the number
of documents in the strongest field that matched (a title beats a tag).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from functools import lru_cache

from superbiz._text import STOP_WORDS, is_cjk, normalize, segmenter

_LATIN_LETTER = re.compile(r"[a-z]")
_SPACE_NEAR_CJK = re.compile(
    r"(?<=[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff])\s+|\s+(?=[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff])"
)
_ALNUM = re.compile(r"[a-z0-9]")
_JOINERS = re.compile(r"[-_]+")


class MatchField(IntEnum):
    """Strength of a match, strongest first."""

    TITLE = 0
    ALIAS = 1
    COVERS = 2
    TAG = 3


@dataclass(frozen=True, slots=True)
class ExactEntry:
    doc_path: str
    title: str
    domain: str
    aliases: tuple[str, ...] = ()
    covers: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ExactMatch:
    doc_path: str
    title: str
    domain: str
    field: MatchField
    key: str


def match_form(text: str) -> str:
    """Normalised text with the spaces next to CJK characters removed, so that
    ``Redis 连接池`` and ``redis连接池`` compare equal, and hyphens and underscores read
    as spaces, so that a query saying ``mysql failover`` names ``mysql-failover.md``.

    >>> match_form("Redis 连接池 耗尽"), match_form("mysql-failover"), match_form("PAY-3002")
    ('redis连接池耗尽', 'mysql failover', 'pay 3002')
    """
    return _SPACE_NEAR_CJK.sub("", normalize(_JOINERS.sub(" ", text)))


def is_specific(term: str) -> bool:
    """Whether ``term`` is specific enough to be an exact key.

    >>> is_specific("支付"), is_specific("支"), is_specific("api"), is_specific("db")
    (True, False, True, False)
    >>> is_specific("问题"), is_specific("the")
    (False, False)
    """
    norm = normalize(term)
    if not norm or norm in STOP_WORDS:
        return False
    cjk = sum(1 for ch in norm if is_cjk(ch))
    return cjk >= 2 or len(_LATIN_LETTER.findall(norm)) >= 3


def _first_unit(key: str) -> str:
    """The bucket of a key: its first CJK character or its first Latin word."""
    if is_cjk(key[0]):
        return key[0]
    match = re.match(r"[a-z0-9]+", key)
    return match.group(0) if match else key[0]


@lru_cache(maxsize=4096)
def _cjk_boundaries(text: str) -> frozenset[int]:
    return frozenset(pos for _, start, end in segmenter().tokenize(text) for pos in (start, end))


class ExactIndex:
    def __init__(self, entries: Iterable[ExactEntry] = ()) -> None:
        self._buckets: dict[str, list[tuple[str, MatchField, ExactEntry]]] = defaultdict(list)
        self.size = 0
        for entry in entries:
            self.add(entry)

    def add(self, entry: ExactEntry) -> None:
        fields = (
            (MatchField.TITLE, (entry.title,)),
            (MatchField.ALIAS, entry.aliases),
            (MatchField.COVERS, entry.covers),
            (MatchField.TAG, entry.tags),
        )
        for field, keys in fields:
            for key in keys:
                norm = match_form(key)
                if is_specific(norm):
                    self._buckets[_first_unit(norm)].append((norm, field, entry))
                    self.size += 1

    def match(self, query: str, domain: str | None = None) -> list[ExactMatch]:
        """Documents whose keys occur in ``query``, one match per document (its strongest
        field), strongest field first, then longest key."""
        text = match_form(query)
        best: dict[str, ExactMatch] = {}
        for start, unit in self._units(text):
            for key, field, entry in self._buckets.get(unit, ()):
                if domain and entry.domain != domain:
                    continue
                if not text.startswith(key, start) or not self._on_boundary(text, start, key):
                    continue
                current = best.get(entry.doc_path)
                if current is None or (field, -len(key)) < (current.field, -len(current.key)):
                    best[entry.doc_path] = ExactMatch(
                        entry.doc_path, entry.title, entry.domain, field, key
                    )
        return sorted(best.values(), key=lambda m: (m.field, -len(m.key), m.doc_path))

    @staticmethod
    def naming(matches: list[ExactMatch]) -> list[ExactMatch]:
        """The matches in the strongest field that *names* a document (title, alias,
        covers): what the L0 count means. A tag describes a group of documents, so a
        tag match alone never makes a result PRECISE."""
        named = [m for m in matches if m.field is not MatchField.TAG]
        return [m for m in named if m.field == named[0].field] if named else []

    @staticmethod
    def _units(text: str) -> Iterable[tuple[int, str]]:
        for pos, ch in enumerate(text):
            if is_cjk(ch):
                yield pos, ch
            elif _ALNUM.match(ch) and (pos == 0 or not _ALNUM.match(text[pos - 1])):
                match = re.match(r"[a-z0-9]+", text[pos:])
                if match:
                    yield pos, match.group(0)

    @staticmethod
    def _on_boundary(text: str, start: int, key: str) -> bool:
        end = start + len(key)
        if _ALNUM.match(key[0]) and start > 0 and _ALNUM.match(text[start - 1]):
            return False
        if _ALNUM.match(key[-1]) and end < len(text) and _ALNUM.match(text[end]):
            return False
        if is_cjk(key[0]) or is_cjk(key[-1]):
            bounds = _cjk_boundaries(text)
            if is_cjk(key[0]) and start not in bounds:
                return False
            if is_cjk(key[-1]) and end not in bounds:
                return False
        return True
