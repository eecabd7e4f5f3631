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
from superbiz.storage.repository import DocumentRepository, KeptVectors

log = logging.getLogger(__name__)

#: a map entry as the planner embeds it: its document's path, its entry text (title,
#: covers, when-to-retrieve) and its title
MapEntry = tuple[str, str, str]


def text_hash(text: str) -> str:
    """What a kept vector was made from.

    >>> text_hash("Refunds") == text_hash("Refunds"), text_hash("Refunds") == text_hash("refunds")
    (True, False)
    """
    return hashlib.sha256(text.encode()).hexdigest()


class KeptMapVectors:
    """Vectors of map entries, read from the store where they were made from the same
    texts by the same embedder, embedded and kept otherwise. The store failing costs
    only time: the texts are embedded and the plan goes on."""

    def __init__(self, documents: DocumentRepository, embedder: Embedder) -> None:
        self.documents = documents
        self.embedder = embedder

    def vectors(self, entries: Sequence[MapEntry]) -> tuple[np.ndarray, np.ndarray]:
        """The entry vectors and the title vectors of ``entries``, a row each in their
        order."""
        count, dimension = len(entries), self.embedder.dimension
        texts = [entry for _, entry, _ in entries] + [title for _, _, title in entries]
        hashes = [text_hash(text) for text in texts]  # the entries' then the titles'
        kept = self._read([path for path, _, _ in entries])
        rows = np.empty((2 * count, dimension), dtype=np.float32)
        stale = []  # rows whose text changed, or was never embedded by this embedder
        for row, digest in enumerate(hashes):
            vector = _valid(kept.get(entries[row % count][0]), row >= count, digest, dimension)
            if vector is None:
                stale.append(row)
            else:
                rows[row] = vector
        if stale:
            for part in ([r for r in stale if r < count], [r for r in stale if r >= count]):
                # entries and titles apart: a batch's rows vary with its company in the
                # last digits, and the entries' batch is what plans were measured with
                rows[part] = self.embedder.embed([texts[row] for row in part])
            self._keep(
                [
                    (
                        entries[i][0],
                        KeptVectors(
                            hashes[i], _bytes(rows[i]), hashes[count + i], _bytes(rows[count + i])
                        ),
                    )
                    for i in sorted({row % count for row in stale})
                ]
            )
        return rows[:count], rows[count:]

    def _read(self, paths: list[str]) -> dict[str, KeptVectors]:
        try:
            return self.documents.map_vectors(self.embedder.name, paths)
        except (StoreError, SQLAlchemyError) as exc:
            log.warning("map vectors not read, embedding them instead: %s", exc)
            return {}

    def _keep(self, rows: list[tuple[str, KeptVectors]]) -> None:
        try:
            self.documents.save_map_vectors(self.embedder.name, rows)
        except (StoreError, SQLAlchemyError) as exc:
            log.warning("map vectors not kept, the next process embeds them again: %s", exc)


def _valid(held: KeptVectors | None, title: bool, digest: str, dimension: int) -> np.ndarray | None:
    """The kept title (or entry) vector, where it was made from the text of ``digest``."""
    if held is None:
        return None
    kept_hash, data = (held.title_hash, held.title) if title else (held.entry_hash, held.entry)
    if kept_hash != digest or len(data) != 4 * dimension:
        return None
    return np.frombuffer(data, dtype="<f4")


def _bytes(vector: np.ndarray) -> bytes:
    return vector.astype("<f4").tobytes()
