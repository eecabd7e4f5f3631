"""What a knowledge base measures about itself whenever its documents change.

Two things a lookup needs depend on this KB rather than on the code: how many documents
use each exact key (``KeyFrequency``: a key many documents use names none of them), and
the level thresholds its embedder shows on its own documents (``LevelCalibration``). Both
are measured from the stored documents and their chunks, read in one query, after an
ingest or a delete changed the documents, and kept in ``kb_meta``, so that every process
serving the KB reads the same numbers. Measured on dev (401 documents): about 5 s.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import numpy as np

from superbiz.knowledge.base import (
    KEY_FREQUENCY_KEY,
    LEVEL_CALIBRATION_KEY,
    KnowledgeBase,
    exact_entry,
)
from superbiz.retrieval.calibration import (
    MIN_PROBES,
    LevelCalibration,
    calibrate_levels,
    choose_probes,
)
from superbiz.retrieval.exact_index import ExactIndex, KeyFrequency
from superbiz.retrieval.records import ChunkHit
from superbiz.storage.repository import StoredDocument

log = logging.getLogger(__name__)

_NONE = np.zeros((0, 1), dtype=np.float32)


@dataclass(frozen=True, slots=True)
class KnowledgeStatistics:
    frequency: KeyFrequency
    calibration: LevelCalibration
    seconds: float


def measure(
    kb: KnowledgeBase, outside_stores: Callable[[], AbstractContextManager[object]] = nullcontext
) -> KnowledgeStatistics:
    """Both measurements on the KB as stored now (nothing is written); what it computes
    from what it read (seconds for a large KB) runs inside ``outside_stores``."""
    started = time.perf_counter()
    docs = kb.documents.all()
    chunks = kb.store.chunks_of_documents([doc.path for doc in docs]) if docs else {}
    with outside_stores():
        return _measured(kb, docs, chunks, started)


def _measured(
    kb: KnowledgeBase,
    docs: list[StoredDocument],
    chunks: dict[str, list[ChunkHit]],
    started: float,
) -> KnowledgeStatistics:
    # every key a document may be named by, the map's derived covers too: the planner
    # matches those (``MapPlanner``), and the same frequency judges them
    keys = ExactIndex(exact_entry(doc, derived_covers=True) for doc in docs)
    frequency = keys.frequency(
        (doc.path, "\n".join([doc.title, *(c.text for c in chunks.get(doc.path, []))]))
        for doc in docs
    )
    probes = choose_probes(
        {doc.path: doc.title for doc in docs},
        {doc.path: [c.heading for c in chunks.get(doc.path, [])] for doc in docs},
    )
    vectored = [c for doc in docs for c in chunks.get(doc.path, []) if c.vector is not None]
    if len(probes) < MIN_PROBES or not vectored:  # too small to measure: nothing embedded
        calibration = calibrate_levels(kb.embedder.name, len(docs), probes, _NONE, [], _NONE)
    else:
        calibration = calibrate_levels(
            kb.embedder.name,
            len(docs),
            probes,
            kb.embedder.embed([p.text for p in probes]),
            [c.doc_path for c in vectored],
            np.stack([c.vector for c in vectored if c.vector is not None]),
        )
    return KnowledgeStatistics(frequency, calibration, time.perf_counter() - started)


def refresh_statistics(
    kb: KnowledgeBase, outside_stores: Callable[[], AbstractContextManager[object]] = nullcontext
) -> KnowledgeStatistics:
    """Measure the KB and store the result for every process; the lookups of this one
    use it from their next call. ``outside_stores``: as for ``measure`` (an upload lets
    go of the store lock there, so turns go on)."""
    stats = measure(kb, outside_stores)
    kb.meta.set_measurements(
        {
            KEY_FREQUENCY_KEY: stats.frequency.to_json(),
            LEVEL_CALIBRATION_KEY: stats.calibration.to_json(),
        }
    )
    kb.invalidate()
    log.info("knowledge statistics measured in %.1f s", stats.seconds)
    return stats
