"""What a knowledge base measures about itself whenever its documents change.

Two things a lookup needs depend on this KB rather than on the code: how many documents
use each exact key (``KeyFrequency``: a key many documents use names none of them), and
the level thresholds its embedder shows on its own documents (``LevelCalibration``). Both
are measured from the stored documents and their chunks, read in one query, after an
ingest or a delete changed the documents, and kept in ``kb_meta``, so that every process
serving the KB reads the same numbers. Measured on dev (401 documents): about 5 s; past
``WHOLE_DOCUMENTS`` a change measures only what it touched (``measure``).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from weakref import WeakKeyDictionary

import numpy as np

from superbiz.knowledge.kb._key_count import Texts, count_keys
from superbiz.knowledge.kb.base import KEY_FREQUENCY_KEY, LEVEL_CALIBRATION_KEY, KnowledgeBase
from superbiz.knowledge.kb.exact_entries import exact_entry
from superbiz.retrieval.calibration import (
    MIN_PROBES,
    LevelCalibration,
    calibrate_levels,
    choose_probes,
)
from superbiz.retrieval.exact_index import ExactEntry, ExactIndex, KeyText
from superbiz.retrieval.key_frequency import KeyFrequency
from superbiz.retrieval.records import ChunkHit
from superbiz.retrieval.store import Outside
from superbiz.storage.repository import StoredDocument

log = logging.getLogger(__name__)

_NONE = np.zeros((0, 1), dtype=np.float32)
#: documents a KB is measured whole up to (every change): the benchmark sets are below it
WHOLE_DOCUMENTS = 2000
#: documents the level thresholds are measured on past it (a reproducible sample)
CALIBRATION_DOCUMENTS = 2000
#: how far a large KB's size may move before its thresholds are measured again
RECALIBRATE_CHANGE = 0.25
#: documents whose chunks are read at a time
_READ_BATCH = 500
#: characters of the documents' texts a process keeps for the next measure (``_Kept``):
#: 20–40 MB; the 400 files of ``eval sync`` hold about a million
TEXTS_KEPT = 20_000_000


@dataclass(frozen=True, slots=True)
class KnowledgeStatistics:
    frequency: KeyFrequency
    calibration: LevelCalibration
    seconds: float


@dataclass
class _Kept:
    """What measuring the KB again reuses in this process: every document's keys and
    their index, redone for the documents that changed (``_keys``: building them took
    1.3 s of a one-file upload into 11,925 documents); and for a KB of up to
    ``WHOLE_DOCUMENTS``, each document's text as the key count read it (by path, content
    hash and title: its chunks are its content's) and each probe's vector (a sync of one
    file of 400 read, analysed and embedded them all again: ``eval sync``)."""

    embedder: str
    keys: dict[str, tuple[StoredDocument, ExactEntry]] = field(default_factory=dict)
    index: ExactIndex = field(default_factory=ExactIndex)
    texts: dict[tuple[str, str, str], KeyText] = field(default_factory=dict)
    probes: dict[str, np.ndarray] = field(default_factory=dict)


_KEPT: WeakKeyDictionary[KnowledgeBase, _Kept] = WeakKeyDictionary()


def _kept(kb: KnowledgeBase) -> _Kept:
    kept = _KEPT.get(kb)
    if kept is None or kept.embedder != kb.embedder.name:
        kept = _KEPT[kb] = _Kept(kb.embedder.name)
    return kept


def _text_key(doc: StoredDocument) -> tuple[str, str, str]:
    return doc.path, doc.content_hash, doc.title


def _within(
    budget: int, texts: list[tuple[tuple[str, str, str], KeyText]]
) -> dict[tuple[str, str, str], KeyText]:
    """The first of ``texts`` that hold ``budget`` characters together.

    >>> texts = [(("a.md", "h", "A"), KeyText("abc", ())), (("b.md", "", ""), KeyText("defg", ()))]
    >>> [path for path, _, _ in _within(5, texts)]
    ['a.md']
    """
    kept = {}
    for key, text in texts:
        budget -= len(text.form)
        if budget < 0:
            break
        kept[key] = text
    return kept


def _keys(kept: _Kept, docs: list[StoredDocument]) -> list[ExactEntry]:
    """Every key a document may be named by, the map's derived covers too (the planner
    matches those, ``MapPlanner``, and the same frequency judges them), with
    ``kept.index`` brought to them: a document whose object is the one keyed last time
    (``KnowledgeBase.current_documents`` keeps an unchanged one's) is not keyed again."""
    held, index = kept.keys, kept.index
    now = {doc.path: doc for doc in docs}
    for path in held.keys() - now.keys():
        index.remove(path)
    keyed: dict[str, tuple[StoredDocument, ExactEntry]] = {}
    for path, doc in now.items():
        earlier = held.get(path)
        if earlier is not None and earlier[0] is doc:
            keyed[path] = earlier
            continue
        if earlier is not None:
            index.remove(path)
        entry = exact_entry(doc, derived_covers=True)
        index.add(entry)
        keyed[path] = (doc, entry)
    kept.keys = keyed
    return [entry for _, entry in keyed.values()]


def measure(
    kb: KnowledgeBase, *, whole: bool = False, outside_stores: Outside = nullcontext
) -> KnowledgeStatistics:
    """Both measurements on the KB as stored now (nothing is written).

    Up to ``WHOLE_DOCUMENTS`` documents (or with ``whole``) every document is read and
    counted. Past it a change counts only the documents it touched against the stored
    counts (``KeyFrequency.updated``), and the level thresholds, measured on a
    reproducible sample of ``CALIBRATION_DOCUMENTS``, are kept until the KB has grown or
    shrunk by ``RECALIBRATE_CHANGE``: 50,000 documents measured whole took minutes and
    gigabytes at every upload (``superbiz eval scale``). It reads under the stores and
    computes (seconds for a large KB) inside ``outside_stores``, the key count a batch of
    documents at a time (``count_keys``). Measured whole, a KB reads and embeds again only
    what changed since this process last measured it (``_Kept``)."""
    started = time.perf_counter()
    docs = list(kb.current_documents(fresh=True).values())
    hashes = {doc.path: doc.content_hash for doc in docs}
    small = len(docs) <= WHOLE_DOCUMENTS
    previous = None if whole or small else kb.key_frequency
    kept = _kept(kb)
    read: dict[str, KeyText] | None = {} if small else None
    incremental = previous is not None and bool(previous.measured)
    counted = docs
    gone: list[str] = []
    if previous is not None and incremental:
        counted = [doc for doc in docs if previous.measured.get(doc.path) != doc.content_hash]
        gone = [path for path, digest in previous.measured.items() if hashes.get(path) != digest]
    with outside_stores():
        entries = _keys(kept, docs)
    fresh = count_keys(
        entries,
        lambda: _texts(kb, counted, kept.texts),
        documents=len(counted),
        outside=outside_stores,
        read=read,
        index=kept.index,
    )
    kept.texts = (
        _within(TEXTS_KEPT, [(_text_key(d), read[d.path]) for d in docs if d.path in read])
        if read
        else {}
    )
    if not small:
        kept.probes = {}
    calibration = kb.calibration
    recalibrate = whole or not _still_holds(calibration, kb.embedder.name, len(docs))
    sample = _sample(docs) if recalibrate else []
    chunks = kb.store.chunks_of_documents([doc.path for doc in sample]) if sample else {}
    with outside_stores():
        if previous is not None and incremental:
            frequency = previous.updated(hashes, fresh, gone)
        else:
            frequency = KeyFrequency(fresh.documents, fresh.counts, fresh.users, hashes)
        if recalibrate:
            calibration = _calibrate(kb, len(docs), sample, chunks, kept if small else None)
    assert calibration is not None
    return KnowledgeStatistics(frequency, calibration, time.perf_counter() - started)


def _texts(
    kb: KnowledgeBase, docs: list[StoredDocument], known: dict[tuple[str, str, str], KeyText]
) -> Iterator[Texts]:
    """Each document's path and text (title and chunks), ``_READ_BATCH`` at a time; a
    text ``known`` as read before is not read again."""
    for start in range(0, len(docs), _READ_BATCH):
        batch = docs[start : start + _READ_BATCH]
        held = {doc.path: known.get(_text_key(doc)) for doc in batch}
        unread = [path for path, text in held.items() if text is None]
        chunks = kb.store.chunks_of_documents(unread, vectors=False) if unread else {}
        yield [(doc.path, held[doc.path] or _joined(doc, chunks)) for doc in batch]


def _joined(doc: StoredDocument, chunks: dict[str, list[ChunkHit]]) -> str:
    """A document's text as the key count reads it: its title and its chunks."""
    return "\n".join([doc.title, *(c.text for c in chunks.get(doc.path, []))])


def _still_holds(calibration: LevelCalibration | None, embedder: str, documents: int) -> bool:
    """Whether a large KB's stored thresholds still stand for ``documents`` documents."""
    if calibration is None or calibration.embedder != embedder or not calibration.current:
        return False
    if documents <= WHOLE_DOCUMENTS or calibration.documents <= WHOLE_DOCUMENTS:
        return False
    return abs(documents - calibration.documents) <= RECALIBRATE_CHANGE * calibration.documents


def _sample(docs: list[StoredDocument]) -> list[StoredDocument]:
    """``docs``, or a reproducible sample of ``CALIBRATION_DOCUMENTS`` of them (in their
    order): what the level thresholds are measured on."""
    if len(docs) <= CALIBRATION_DOCUMENTS:
        return docs
    chosen = set(sorted((_stable(doc.path), doc.path) for doc in docs)[:CALIBRATION_DOCUMENTS])
    return [doc for doc in docs if (_stable(doc.path), doc.path) in chosen]


def _calibrate(
    kb: KnowledgeBase,
    documents: int,
    sample: list[StoredDocument],
    chunks: dict[str, list[ChunkHit]],
    kept: _Kept | None,
) -> LevelCalibration:
    """The level thresholds of a KB of ``documents`` documents, measured on ``sample``."""
    probes = choose_probes(
        {doc.path: doc.title for doc in sample},
        {doc.path: [c.heading for c in chunks.get(doc.path, [])] for doc in sample},
    )
    vectored = [c for doc in sample for c in chunks.get(doc.path, []) if c.vector is not None]
    if len(probes) < MIN_PROBES or not vectored:  # too small to measure: nothing embedded
        return calibrate_levels(kb.embedder.name, documents, probes, _NONE, [], _NONE)
    return calibrate_levels(
        kb.embedder.name,
        documents,
        probes,
        _embedded(kb, [p.text for p in probes], kept),
        [c.doc_path for c in vectored],
        np.stack([c.vector for c in vectored if c.vector is not None]),
    )


def _embedded(kb: KnowledgeBase, texts: list[str], kept: _Kept | None) -> np.ndarray:
    """``kb.embedder.embed(texts)``, each text ``kept`` embedded once."""
    if kept is None:
        return kb.embedder.embed(texts)
    missing = [text for text in dict.fromkeys(texts) if text not in kept.probes]
    if missing:
        kept.probes.update(zip(missing, kb.embedder.embed(missing), strict=True))
    kept.probes = {text: kept.probes[text] for text in texts}
    return np.stack([kept.probes[text] for text in texts])


def _stable(path: str) -> str:
    return hashlib.sha1(path.encode()).hexdigest()


def refresh_statistics(
    kb: KnowledgeBase, *, whole: bool = False, outside_stores: Outside = nullcontext
) -> KnowledgeStatistics:
    """Measure the KB (``measure``) and store the result for every process; the lookups
    of this one use it from their next call. ``outside_stores``: as for ``measure`` (an
    upload lets go of the store lock there, so turns go on)."""
    stats = measure(kb, whole=whole, outside_stores=outside_stores)
    kb.meta.set_measurements(
        {
            KEY_FREQUENCY_KEY: stats.frequency.to_json(),
            LEVEL_CALIBRATION_KEY: stats.calibration.to_json(),
        }
    )
    kb.changed()
    log.info("knowledge statistics measured in %.1f s", stats.seconds)
    return stats
