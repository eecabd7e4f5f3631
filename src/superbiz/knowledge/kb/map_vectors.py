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
from collections.abc import Iterable, Sequence

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
        order. Read into the two matrices as the store hands them over: the map's
        vectors are held once, never also as rows or bytes."""
        count, dimension = len(entries), self.embedder.dimension
        texts = ([entry for _, entry, _ in entries], [title for _, _, title in entries])
        hashes = ([text_hash(t) for t in texts[0]], [text_hash(t) for t in texts[1]])
        matrices = (
            np.empty((count, dimension), dtype=np.float32),
            np.empty((count, dimension), dtype=np.float32),
        )
        found = (np.zeros(count, dtype=bool), np.zeros(count, dtype=bool))
        self._read(entries, hashes, matrices, found)
        stale = [np.flatnonzero(~held) for held in found]
        for rows, matrix, part in zip(stale, matrices, texts, strict=True):
            if rows.size:
                # entries and titles apart: a batch's rows vary with its company in the
                # last digits, and the entries' batch is what plans were measured with
                matrix[rows] = self.embedder.embed([part[row] for row in rows])
        if any(rows.size for rows in stale):
            changed = np.union1d(*stale).tolist()
            self._keep(
                (
                    entries[i][0],
                    KeptVectors(
                        hashes[0][i], _bytes(matrices[0][i]), hashes[1][i], _bytes(matrices[1][i])
                    ),
                )
                for i in changed
            )
        return matrices

    def _read(
        self,
        entries: Sequence[MapEntry],
        hashes: tuple[list[str], list[str]],
        matrices: tuple[np.ndarray, np.ndarray],
        found: tuple[np.ndarray, np.ndarray],
    ) -> None:
        """Fill the rows whose kept vector was made from the same text, marking them
        ``found``; a store that fails leaves the rest to be embedded."""
        at: dict[str, list[int]] = {}
        for row, (path, _, _) in enumerate(entries):
            at.setdefault(path, []).append(row)
        size = 4 * self.embedder.dimension
        try:
            for path, held in self.documents.map_vectors(self.embedder.name, at):
                pairs = ((held.entry_hash, held.entry), (held.title_hash, held.title))
                for row in at.get(path, ()):
                    for k, (digest, data) in enumerate(pairs):
                        if digest == hashes[k][row] and len(data) == size:
                            matrices[k][row] = np.frombuffer(data, dtype="<f4")
                            found[k][row] = True
        except (StoreError, SQLAlchemyError) as exc:
            log.warning("map vectors not read, embedding them instead: %s", exc)

    def _keep(self, rows: Iterable[tuple[str, KeptVectors]]) -> None:
        try:
            self.documents.save_map_vectors(self.embedder.name, rows)
        except (StoreError, SQLAlchemyError) as exc:
            log.warning("map vectors not kept, the next process embeds them again: %s", exc)


def _bytes(vector: np.ndarray) -> bytes:
    return vector.astype("<f4").tobytes()
