"""L0: the exact-term index over document titles, aliases, ``covers`` and ``tags``.

A key matches when it occurs in the query (after NFKC + case-fold) on word
boundaries: Latin keys between non-alphanumerics, Chinese keys on jieba token
boundaries of the query, so ``数据`` does not match inside ``数据库``, and never a part of
a URL, host name, path or identifier (``grafana.kafka.example.net`` does not name a page
titled "Kafka"; the whole identifier may). Only specific keys are indexed: not a stop
word, at least 2 CJK characters or 3 Latin letters, and, where the knowledge base's
document frequencies are known (``KeyFrequency``), used by few of its documents: a key
that many documents' text uses (the product's name in its own runbooks, "cluster" in
OpenShift's) names none of them, whatever the script of the key or of its title.
Matches are ranked by field strength; the count that the normaliser uses is the number
of documents in the strongest field that matched (a title beats a tag).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Callable, Collection, Container, Iterable, Iterator, MutableMapping
from dataclasses import dataclass
from enum import IntEnum
from functools import lru_cache
from typing import NamedTuple

from superbiz._text import STOP_WORDS, cjk_count, has_cjk, is_cjk, normalize, segmenter
from superbiz.retrieval._key_scan import Scanner, scanner
from superbiz.retrieval.key_frequency import KEY_DOCUMENTS_LIMIT, KeyFrequency

_LATIN_LETTER = re.compile(r"[a-z]")
_SPACE_NEAR_CJK = re.compile(
    r"(?<=[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff])\s+|\s+(?=[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff])"
)
_ALNUM = re.compile(r"[a-z0-9]")
#: where a key may start (``ExactIndex._units``): a CJK character, a run of ``[a-z0-9]``
_UNIT = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|[a-z0-9]+")
_JOINERS = re.compile(r"[-_]+")
#: URLs, host names, paths, e-mail addresses and identifiers (``a.b``, ``a/b``, ``a_b``,
#: ``a:b``, ``a@b``, ``a=b``), found in the NFKC-case-folded text before hyphens and
#: underscores become spaces
_COMPOUND = re.compile(
    r"[a-z][a-z0-9+.-]*://[^\s<>\"'`()\[\]{}，。、；）（]+"
    r"|(?<![a-z0-9])/?[a-z0-9][a-z0-9_-]*(?:[./:@=_\\][a-z0-9][a-z0-9_-]*)+/?"
    r"|(?<![a-z0-9])/[a-z0-9][a-z0-9_.-]*"
)
#: private-use characters that mark a compound's ends while the text is normalised
_OPEN, _CLOSE = "\ue000", "\ue001"
_MARKED = f"{_OPEN}\\g<0>{_CLOSE}"


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
    #: the other documents whose text uses the key (a few: more and it is no key)
    others: tuple[str, ...] = ()


def match_form(text: str) -> str:
    """Normalised text with the spaces next to CJK characters removed, so that
    ``Redis 连接池`` and ``redis连接池`` compare equal, and hyphens and underscores read
    as spaces, so that a query saying ``mysql failover`` names ``mysql-failover.md``.

    >>> match_form("Redis 连接池 耗尽"), match_form("mysql-failover"), match_form("PAY-3002")
    ('redis连接池耗尽', 'mysql failover', 'pay 3002')
    """
    return _form(normalize(text))


def _form(norm: str) -> str:
    return _SPACE_NEAR_CJK.sub("", " ".join(_JOINERS.sub(" ", norm).split()))


class KeyText(NamedTuple):
    """A text as the key count reads it (``compound_spans``): its match form, and where in
    it the compounds are."""

    form: str
    compounds: tuple[tuple[int, int], ...]


def compound_spans(text: str) -> KeyText:
    """``match_form(text)`` and where in it the URLs, host names, paths and identifiers
    are (start, end): a key inside one of them, short of the whole, is no match.

    >>> read = compound_spans("Lag on grafana.kafka.example.net for kafka_consumer_lag")
    >>> read.form, read.compounds
    ('lag on grafana.kafka.example.net for kafka consumer lag', ((7, 32), (37, 55)))
    >>> compound_spans("Kafka 消费延迟").compounds
    ()
    """
    norm = normalize(text).replace(_OPEN, "").replace(_CLOSE, "")  # a PDF's icon glyphs
    form = _form(_COMPOUND.sub(_MARKED, norm))
    head, *compounds = form.split(_OPEN)
    out = [head]
    spans: list[tuple[int, int]] = []
    end = len(head)
    for piece in compounds:  # the compound, its end mark, and the text up to the next one
        inner, _, after = piece.partition(_CLOSE)
        spans.append((end, end + len(inner)))
        out += (inner, after)
        end += len(inner) + len(after)
    return KeyText("".join(out), tuple(spans))


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
    return cjk_count(norm) >= 2 or len(_LATIN_LETTER.findall(norm)) >= 3


_CAMEL_HUMP = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WORD = re.compile(r"[^\W_]+")


def names_by_file_name(stem: str) -> bool:
    """Whether a file's name (its stem) may name its document: only a name of several
    words (``mysql-failover``, ``NodeClockSkewDetected``, ``PAY-3002``). One Latin word is
    how the file was filed, not what the document is called (DolphinScheduler's
    ``upgrade/incompatible.md`` is titled 不向前兼容的更新 and is not what an alert saying
    "may be incompatible" is about); the title, aliases, covers and tags name it. A
    Chinese stem is judged like any Chinese key.

    >>> [names_by_file_name(s) for s in ("incompatible", "q001", "README", "kafka")]
    [False, False, False, False]
    >>> [names_by_file_name(s) for s in ("mysql-failover", "NodeClockSkewDetected", "支付回调")]
    [True, True, True]
    """
    if has_cjk(stem):
        return True
    return len(_WORD.findall(_CAMEL_HUMP.sub(" ", stem))) >= 2


def _first_unit(key: str) -> str:
    """The bucket of a key: its first CJK character or its first Latin word."""
    if is_cjk(key[0]):
        return key[0]
    match = re.match(r"[a-z0-9]+", key)
    return match.group(0) if match else key[0]


@lru_cache(maxsize=4096)
def _cjk_boundaries(text: str) -> frozenset[int]:
    return _boundaries(text)


def _boundaries(text: str) -> frozenset[int]:
    return frozenset(pos for _, start, end in segmenter().tokenize(text) for pos in (start, end))


#: jieba's blocks: it cuts a text at this expression and segments each block on its own
_JIEBA_BLOCK = re.compile(r"[\u4e00-\u9fd5a-zA-Z0-9+#&._%\-]+")


class _BlockBoundaries:
    """Where jieba's tokens of a whole document start and end, segmenting only the
    blocks asked about. jieba cuts a text into blocks (``_JIEBA_BLOCK`` runs and what lies
    between them) and segments each block alone, so a position's status depends on its
    block only: a document's frequency count asks about the few places where a Chinese
    key occurs, and its other blocks are never segmented (a block seen before is looked
    up: ``_block_boundaries``)."""

    def __init__(self, text: str) -> None:
        edges = {0, len(text)}
        for block in _JIEBA_BLOCK.finditer(text):
            edges.update(block.span())
        self._edges = sorted(edges)
        self._text = text

    def __contains__(self, pos: object) -> bool:
        if not isinstance(pos, int):
            return False
        at = bisect_right(self._edges, pos) - 1
        start = self._edges[at]
        if pos == start:
            return True
        if at + 1 >= len(self._edges):
            return False
        return pos - start in _block_boundaries(self._text[start : self._edges[at + 1]])


@lru_cache(maxsize=65536)
def _block_boundaries(block: str) -> frozenset[int]:
    return _boundaries(block)


#: a key, its field and its document, as a bucket holds them
_Keyed = tuple[str, MatchField, ExactEntry]
#: a bucket's keys by length, then by key
_ByLength = dict[int, dict[str, list[_Keyed]]]
#: buckets up to this many keys are tried key by key, as every bucket was before (not tuned)
_SCANNED_BUCKET = 32


class ExactIndex:
    """``frequency`` (kept as ``key_frequency``), when given, leaves out of the matches
    the keys too common in this KB to name a document (``KeyFrequency.names_a_document``):
    judged at match time, so a new measurement is a new ``key_frequency``, not a new
    index, and a changed document is one ``remove`` and one ``add``."""

    def __init__(
        self, entries: Iterable[ExactEntry] = (), frequency: KeyFrequency | None = None
    ) -> None:
        self._buckets: dict[str, list[_Keyed]] = defaultdict(list)
        #: the buckets holding each document's keys
        self._units_of: dict[str, set[str]] = defaultdict(set)
        #: large buckets by key length (``_starting_at``), with the bucket they were made of
        self._by_length: dict[str, tuple[list[_Keyed], int, _ByLength]] = {}
        self.key_frequency = frequency
        self.size = 0
        #: every key as one automaton, for ``frequency`` (made again after a change, beside
        #: the last one while the keys added since are few)
        self._scanner: Scanner | None = None
        self._scanner_made = False
        for entry in entries:
            self.add(entry)

    def keys(self) -> set[str]:
        """Every key indexed (in ``match_form``)."""
        return {key for bucket in self._buckets.values() for key, _, _ in bucket}

    def add(self, entry: ExactEntry) -> None:
        fields = (
            (MatchField.TITLE, (entry.title,)),
            (MatchField.ALIAS, entry.aliases),
            (MatchField.COVERS, entry.covers),
            (MatchField.TAG, entry.tags),
        )
        for field_, keys in fields:
            for key in keys:
                norm = match_form(key)
                if not is_specific(norm):
                    continue
                unit = _first_unit(norm)
                self._buckets[unit].append((norm, field_, entry))
                self._units_of[entry.doc_path].add(unit)
                self.size += 1
                self._scanner_made = False

    def remove(self, doc_path: str) -> None:
        """Take ``doc_path``'s keys out (each bucket is replaced, never changed in place
        while a lookup may be reading it)."""
        self._scanner_made = False
        for unit in self._units_of.pop(doc_path, ()):
            bucket = self._buckets.get(unit, [])
            kept = [item for item in bucket if item[2].doc_path != doc_path]
            self.size -= len(bucket) - len(kept)
            if kept:
                self._buckets[unit] = kept
            else:
                self._buckets.pop(unit, None)
            self._by_length.pop(unit, None)

    def match(
        self, query: str, domain: str | None = None, hidden: Collection[str] = ()
    ) -> list[ExactMatch]:
        """Documents whose keys occur in ``query``, one match per document (its strongest
        field), strongest field first, then longest key; none of ``hidden`` (documents
        the reader may not read: they neither match nor count)."""
        best: dict[str, ExactMatch] = {}
        frequency = self.key_frequency
        for key, field_, entry in self._occurrences(query, _cjk_boundaries):
            if (domain and entry.domain != domain) or entry.doc_path in hidden:
                continue
            if frequency is not None and not frequency.names_a_document(key):
                continue
            current = best.get(entry.doc_path)
            if current is None or (field_, -len(key)) < (current.field, -len(current.key)):
                users = frequency.users.get(key, ()) if frequency else ()
                best[entry.doc_path] = ExactMatch(
                    entry.doc_path,
                    entry.title,
                    entry.domain,
                    field_,
                    key,
                    tuple(p for p in users if p != entry.doc_path and p not in hidden),
                )
        return sorted(best.values(), key=lambda m: (m.field, -len(m.key), m.doc_path))

    def frequency(
        self,
        documents: Iterable[tuple[str, str | KeyText]],
        read: MutableMapping[str, KeyText] | None = None,
    ) -> KeyFrequency:
        """Each key's document frequency over ``documents`` (path, text, or the text as
        ``compound_spans`` reads it), matched as a query is: on word boundaries, never
        inside a URL or an identifier; and which documents use each key that stays one.
        ``read`` is given each text read here, by path, for a count to come."""
        used_by: dict[str, list[str]] = defaultdict(list)
        count = 0
        automaton = self._key_scanner()
        for path, text in documents:
            count += 1
            analysed = compound_spans(text) if isinstance(text, str) else text
            if read is not None:
                read[path] = analysed
            # a document is segmented only where a Chinese key occurs in it
            blocks = lru_cache(maxsize=1)(_BlockBoundaries)
            found: set[str] = set()  # a key found once is not checked again in this text
            keys: Iterator[str]
            if automaton is None:  # the library failed its check: the buckets
                occurring = self._occurring(analysed, blocks, known=found)
                keys = (key for key, _, _ in occurring)
            else:
                keys = self._scanned(automaton, analysed, blocks, known=found)
            for key in keys:
                found.add(key)
            for key in found:
                used_by[key].append(path)
        return KeyFrequency(
            count,
            {key: len(paths) for key, paths in used_by.items()},
            {
                key: tuple(paths)
                for key, paths in used_by.items()
                if len(paths) <= KEY_DOCUMENTS_LIMIT
            },
        )

    def _key_scanner(self) -> Scanner | None:
        """Every key a text can reach as one automaton (``_key_scan``), brought to the keys
        once per change of them (the last automaton kept beside one of the keys added
        since: ``scanner``); None where the library failed its check. A key that no unit
        starts (``_UNIT``) is in no bucket a text reaches, so it is left out."""
        if not self._scanner_made:
            self._scanner = scanner((k for k in self.keys() if _UNIT.match(k)), self._scanner)
            self._scanner_made = True
        return self._scanner

    def _scanned(
        self,
        automaton: Scanner,
        text: KeyText,
        boundaries: Callable[[str], Container[int]],
        known: Container[str],
    ) -> Iterator[str]:
        """The keys ``_occurring`` finds in ``text``, found by ``automaton`` rather than
        by the buckets: the same places, the same checks."""
        form, compounds = text
        for key, start, end in automaton.occurrences(form):
            if (
                key not in known
                and self._on_boundary(form, start, key, boundaries)
                and not _inside_compound(start, end, compounds)
            ):
                yield key

    def _occurrences(
        self,
        query: str,
        boundaries: Callable[[str], Container[int]],
        known: Container[str] = (),
    ) -> Iterator[tuple[str, MatchField, ExactEntry]]:
        """Each key ``query`` holds where a key may stand (word boundaries, not inside a
        compound), with its field and document; keys in ``known`` are skipped."""
        return self._occurring(compound_spans(query), boundaries, known)

    def _occurring(
        self,
        analysed: KeyText,
        boundaries: Callable[[str], Container[int]],
        known: Container[str] = (),
    ) -> Iterator[tuple[str, MatchField, ExactEntry]]:
        text, compounds = analysed
        for start, unit in self._units(text):
            # a key several documents (or fields) hold is one key here: checked once
            stands: dict[str, bool] = {}
            for key, field_, entry in self._starting_at(text, start, unit):
                if key in known:
                    continue
                fits = stands.get(key)
                if fits is None:
                    fits = stands[key] = self._on_boundary(
                        text, start, key, boundaries
                    ) and not _inside_compound(start, start + len(key), compounds)
                if fits:
                    yield key, field_, entry

    def _starting_at(self, text: str, start: int, unit: str) -> list[_Keyed]:
        """The keys of ``unit``'s bucket that ``text`` holds at ``start``. A small bucket
        is tried key by key; a large one (the first word of many titles: thousands of keys
        in a KB of tens of thousands of documents, where trying each made the key count
        after an ingest grow with documents × keys) is looked up once per key length it
        holds. Keys found at one place differ in length, or are one key (of several
        documents or fields), so the order they come in changes no match."""
        bucket = self._buckets.get(unit)
        if not bucket:
            return []
        if len(bucket) <= _SCANNED_BUCKET:
            return [item for item in bucket if text.startswith(item[0], start)]
        return [
            item
            for length, keyed in self._lengths(unit, bucket).items()
            for item in keyed.get(text[start : start + length], ())
        ]

    def _lengths(self, unit: str, bucket: list[_Keyed]) -> _ByLength:
        """``bucket``'s keys by length, then by key; made again when the bucket changed
        (``add`` appends to it, ``remove`` replaces it)."""
        cached = self._by_length.get(unit)
        if cached is not None and cached[0] is bucket and cached[1] == len(bucket):
            return cached[2]
        size = len(bucket)  # a key appended meanwhile is left to the next table
        table: _ByLength = defaultdict(lambda: defaultdict(list))
        for item in bucket[:size]:
            table[len(item[0])][item[0]].append(item)
        self._by_length[unit] = (bucket, size, table)
        return table

    @staticmethod
    def naming(matches: list[ExactMatch]) -> list[ExactMatch]:
        """The matches in the strongest field that *names* a document (title, alias,
        covers): what the L0 count means. A tag describes a group of documents, so a
        tag match alone never makes a result PRECISE."""
        named = [m for m in matches if m.field is not MatchField.TAG]
        return [m for m in named if m.field == named[0].field] if named else []

    @staticmethod
    def _units(text: str) -> Iterable[tuple[int, str]]:
        """Where a key may start: each CJK character and each run of ``[a-z0-9]``."""
        for match in _UNIT.finditer(text):
            yield match.start(), match.group(0)

    @staticmethod
    def _on_boundary(
        text: str, start: int, key: str, boundaries: Callable[[str], Container[int]]
    ) -> bool:
        end = start + len(key)
        if _ALNUM.match(key[0]) and start > 0 and _ALNUM.match(text[start - 1]):
            return False
        if _ALNUM.match(key[-1]) and end < len(text) and _ALNUM.match(text[end]):
            return False
        if is_cjk(key[0]) or is_cjk(key[-1]):
            bounds = boundaries(text)
            if is_cjk(key[0]) and start not in bounds:
                return False
            if is_cjk(key[-1]) and end not in bounds:
                return False
        return True


def _inside_compound(start: int, end: int, compounds: tuple[tuple[int, int], ...]) -> bool:
    """Whether [start, end) lies in a compound without covering all of it (``compounds``
    are sorted and disjoint: only those from the last one starting at or before ``start``
    can overlap, a document has hundreds).

    >>> _inside_compound(2, 4, ((0, 9),)), _inside_compound(0, 9, ((0, 9),))
    (True, False)
    >>> _inside_compound(10, 12, ((0, 9), (20, 30))), _inside_compound(18, 22, ((0, 9), (20, 30)))
    (False, True)
    """
    first = max(bisect_right(compounds, (start, _AFTER_ANY)) - 1, 0)
    for c_start, c_end in compounds[first:]:
        if c_start >= end:
            return False
        if start < c_end and end > c_start and not (start <= c_start and end >= c_end):
            return True
    return False


_AFTER_ANY = 1 << 62
