"""The knowledge map's entry vectors, embedded once per knowledge base, not per process.

The deterministic planner compares a question with every map entry (a document's title,
covers and when-to-retrieve line). Embedding them all is what a process's first plan
paid: 85 s at 50,000 documents, in every ``superbiz ask`` and every new replica. Kept in
the relational store beside a hash of the text each was made from, they are read instead;
only entries whose text (or the embedder) changed are embedded again.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence

import numpy as np
from sqlalchemy.exc import SQLAlchemyError

from superbiz.exceptions import StoreError
from superbiz.retrieval.embedders import Embedder
from superbiz.storage.repository import DocumentRepository

log = logging.getLogger(__name__)


def text_hash(text: str) -> str:
    """What a kept vector was made from.

    >>> text_hash("Refunds") == text_hash("Refunds"), text_hash("Refunds") == text_hash("refunds")
    (True, False)
    """
    return hashlib.sha256(text.encode()).hexdigest()


class KeptMapVectors:
    """Vectors of map texts keyed by their document's path, read from the store where
    one was made from the same text by the same embedder, embedded and kept otherwise.
    The store failing costs only time: the texts are embedded and the plan goes on."""

    def __init__(self, documents: DocumentRepository, embedder: Embedder) -> None:
        self.documents = documents
        self.embedder = embedder

    def vectors(self, kind: str, items: Sequence[tuple[str, str]]) -> np.ndarray:
        """One row per ``(path, text)`` of ``items``, in their order; ``kind`` names which
        of a document's texts they are (``entry``, ``title``)."""
        dimension = self.embedder.dimension
        out = np.empty((len(items), dimension), dtype=np.float32)
        digests = [text_hash(text) for _, text in items]
        kept = self._read(kind, [path for path, _ in items])
        missing = []
        for row, ((path, _), digest) in enumerate(zip(items, digests, strict=True)):
            held = kept.get(path)
            vector = np.frombuffer(held[1], dtype="<f4") if held and held[0] == digest else None
            if vector is None or vector.shape != (dimension,):
                missing.append(row)
            else:
                out[row] = vector
        if missing:
            out[missing] = self.embedder.embed([items[row][1] for row in missing])
            self._keep(kind, [(items[r][0], digests[r], out[r]) for r in missing])
        return out

    def _read(self, kind: str, paths: list[str]) -> dict[str, tuple[str, bytes]]:
        try:
            return self.documents.map_vectors(kind, self.embedder.name, paths)
        except (StoreError, SQLAlchemyError) as exc:
            log.warning("map vectors not read, embedding them instead: %s", exc)
            return {}

    def _keep(self, kind: str, rows: list[tuple[str, str, np.ndarray]]) -> None:
        encoded = [(path, digest, vector.astype("<f4").tobytes()) for path, digest, vector in rows]
        try:
            self.documents.save_map_vectors(kind, self.embedder.name, encoded)
        except (StoreError, SQLAlchemyError) as exc:
            log.warning("map vectors not kept, the next process embeds them again: %s", exc)
