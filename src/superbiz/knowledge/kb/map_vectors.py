"""The knowledge map's entry vectors, embedded once per knowledge base, not per process.

The deterministic planner compares a question with every map entry (a document's title,
covers and when-to-retrieve line). Embedding them all is what a process's first plan
paid: 85 s at 50,000 documents, in every ``superbiz ask`` and every new replica. Kept in
the relational store beside a hash of the text each was made from, they are read instead;
only entries whose text (or the embedder) changed are embedded again. An ingest embeds
the entries of the documents it wrote (``keep``), so that the first plan after it, the
first question a user asks, reads them too (92 s at 50,000 documents before it did).
"""

from __future__ import annotations

import hashlib
import logging
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

import numpy as np
from sqlalchemy.exc import SQLAlchemyError

from superbiz.exceptions import StoreError
from superbiz.retrieval.embedders import Embedder, EmbedTexts
from superbiz.retrieval.store import Outside
from superbiz.storage.repository import DocumentRepository, KeptVectors

log = logging.getLogger(__name__)

#: a map entry as the planner embeds it: its document's path, its entry text (title,
#: covers, when-to-retrieve) and its title
MapEntry = tuple[str, str, str]

#: entries an ingest embeds at a time (``keep``): the benchmark sets' maps fit in one, so
#: their vectors are those a first plan embeds in its one batch
KEEP_BATCH = 2048
#: embedding calls an ingest runs at once (a batch's entries and its titles are two): a
#: core each
KEEP_THREADS = 2
#: windows of ``KEEP_THREADS`` batches an ingest begins before the first is kept: their
#: calls queue up, so the embedding goes on while the ingest measures its statistics
#: (with one window begun, 9,540 new documents' entries mostly waited for the statistics
#: to end: 10 s of the ingest's 36 s after its last chunk); their matrices are what is
#: held meanwhile (64 MB of 512-d vectors)
KEEP_AHEAD = 4


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
        batch = self._read(entries)
        self._embed(batch, 0)
        self._embed(batch, 1)
        batch.copy_titles()
        self._keep(batch)
        return batch.matrices

    def keep(self, entries: Sequence[MapEntry], *, outside: Outside = nullcontext) -> int:
        """Embed and keep the vectors of ``entries`` not kept yet (``keeping``); how many
        texts were embedded."""
        with self.keeping(entries, outside=outside) as finish:
            return finish()

    @contextmanager
    def keeping(
        self,
        entries: Sequence[MapEntry],
        *,
        outside: Outside = nullcontext,
        embed: EmbedTexts | None = None,
    ) -> Iterator[Callable[[], int]]:
        """``keep`` begun on entering: the first ``KEEP_AHEAD`` windows of batches embed
        while the block runs (an ingest flushes its index and measures its statistics
        there, on the other core), and the function it gives finishes: the rest embedded,
        all kept, how many texts were embedded. ``KEEP_BATCH`` entries a batch,
        ``KEEP_THREADS`` embedding calls at once (the entries' and the titles' are apart:
        one call runs on one core), each call as ``vectors`` makes it, with ``embed``
        where given (an ingest's worker processes) and waited for inside ``outside()``.
        Leaving the block by an exception drops the calls not started."""
        embed_texts = embed or self.embedder.embed
        batches = [
            entries[start : start + KEEP_BATCH] for start in range(0, len(entries), KEEP_BATCH)
        ]
        windows = [
            batches[first : first + KEEP_THREADS] for first in range(0, len(batches), KEEP_THREADS)
        ]
        with ThreadPoolExecutor(KEEP_THREADS, thread_name_prefix="map-entries") as pool:

            def start(window: list[Sequence[MapEntry]]) -> _Window:
                read = [self._read(batch) for batch in window]
                calls = [
                    pool.submit(self._embed, batch, part, embed_texts)
                    for batch in read
                    for part in (0, 1)
                ]
                return read, calls

            # the windows begun and not kept yet: a kept one's matrices are let go of
            begun = deque(start(window) for window in windows[:KEEP_AHEAD])

            def finish() -> int:
                embedded = 0
                for number in range(len(windows)):
                    read, calls = begun.popleft()
                    if number + KEEP_AHEAD < len(windows):
                        begun.append(start(windows[number + KEEP_AHEAD]))
                    with outside():
                        for call in calls:
                            call.result()
                    for batch in read:
                        batch.copy_titles()
                        self._keep(batch)
                        embedded += batch.embedding(0).size + batch.embedding(1).size
                return embedded

            try:
                yield finish
            except BaseException:
                for _, calls in begun:
                    for call in calls:
                        call.cancel()
                raise

    def _embed(self, batch: _Batch, part: int, embed: EmbedTexts | None = None) -> None:
        """Embed the rows of ``batch``'s entries (``part`` 0) or titles (1) no kept vector
        was found for (``_Batch.embedding``): apart, as ``vectors`` embeds them (a batch's
        rows vary with its company in the last digits, and the entries' batch is what plans
        were measured with), with ``embed`` where given."""
        rows, texts = batch.embedding(part), batch.texts[part]
        if rows.size:
            batch.matrices[part][rows] = (embed or self.embedder.embed)(
                [texts[row] for row in rows]
            )

    def _read(self, entries: Sequence[MapEntry]) -> _Batch:
        """``entries`` with the rows whose kept vector was made from the same text
        filled; a store that fails leaves them all to be embedded."""
        count, dimension = len(entries), self.embedder.dimension
        texts = ([entry for _, entry, _ in entries], [title for _, _, title in entries])
        hashes = ([text_hash(t) for t in texts[0]], [text_hash(t) for t in texts[1]])
        matrices = (
            np.empty((count, dimension), dtype=np.float32),
            np.empty((count, dimension), dtype=np.float32),
        )
        found = (np.zeros(count, dtype=bool), np.zeros(count, dtype=bool))
        at: dict[str, list[int]] = {}
        for row, (path, _, _) in enumerate(entries):
            at.setdefault(path, []).append(row)
        size = 4 * dimension
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
        stale = (np.flatnonzero(~found[0]), np.flatnonzero(~found[1]))
        same = np.array([entry == title for _, entry, title in entries], dtype=bool)
        return _Batch(entries, texts, hashes, matrices, stale, stale[1][same[stale[1]]])

    def _keep(self, batch: _Batch) -> None:
        """Keep the vectors ``batch`` embedded."""
        changed = np.union1d(*batch.stale).tolist()
        if not changed:
            return
        hashes, matrices = batch.hashes, batch.matrices
        rows = (
            (
                batch.entries[i][0],
                KeptVectors(
                    hashes[0][i], _bytes(matrices[0][i]), hashes[1][i], _bytes(matrices[1][i])
                ),
            )
            for i in changed
        )
        try:
            self.documents.save_map_vectors(self.embedder.name, rows)
        except (StoreError, SQLAlchemyError) as exc:
            log.warning("map vectors not kept, the next process embeds them again: %s", exc)


@dataclass(frozen=True, slots=True)
class _Batch:
    """Map entries on their way to vectors: their entry and title texts and those texts'
    hashes, the two matrices being filled, and the rows of each not found kept."""

    entries: Sequence[MapEntry]
    texts: tuple[list[str], list[str]]
    hashes: tuple[list[str], list[str]]
    matrices: tuple[np.ndarray, np.ndarray]
    stale: tuple[np.ndarray, np.ndarray]
    #: stale title rows whose text is the entry's (a document without covers or a
    #: when-to-retrieve line, every one of the benchmark sets'): the entry's vector is
    #: theirs, the text is not embedded twice
    copied: np.ndarray

    def embedding(self, part: int) -> np.ndarray:
        """The rows of the entries (``part`` 0) or titles (1) to embed."""
        return np.setdiff1d(self.stale[1], self.copied) if part else self.stale[0]

    def copy_titles(self) -> None:
        """Give the ``copied`` title rows their entry's vector (kept or just embedded)."""
        self.matrices[1][self.copied] = self.matrices[0][self.copied]


#: batches read for ``KeptMapVectors.keeping``, and their entries' and titles' embedding calls
_Window = tuple[list[_Batch], list["Future[None]"]]


def _bytes(vector: np.ndarray) -> bytes:
    return vector.astype("<f4").tobytes()
